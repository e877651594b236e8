"""SimCLR-style NT-Xent loss with the self-similarity diagonal masked to -inf, and a CLIP-style symmetric loss with a learned logit scale (clean)."""

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


def augment(x):
    noise = 0.1 * torch.randn_like(x)
    scale = 1.0 + 0.1 * torch.randn(x.size(0), 1)  # (N, 1) per-sample scale
    return scale * x + noise


def nt_xent(z1, z2, temperature=0.5):
    n = z1.size(0)
    z = F.normalize(torch.cat([z1, z2], dim=0), dim=1)  # (2N, D)
    sim = z @ z.T / temperature  # (2N, 2N)
    self_mask = torch.eye(2 * n, dtype=torch.bool)
    sim = sim.masked_fill(self_mask, float("-inf"))
    targets = torch.cat([torch.arange(n, 2 * n), torch.arange(0, n)])
    return F.cross_entropy(sim, targets)


class Encoder(nn.Module):
    def __init__(self, d_in=8, d_hidden=32, d_out=16):
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(d_in, d_hidden), nn.ReLU(),
                                      nn.Linear(d_hidden, d_hidden), nn.ReLU())
        self.projector = nn.Linear(d_hidden, d_out)

    def forward(self, x):
        return self.projector(self.backbone(x))


class CLIPHead(nn.Module):
    def __init__(self, d_a, d_b, d_joint=16):
        super().__init__()
        self.proj_a = nn.Linear(d_a, d_joint)
        self.proj_b = nn.Linear(d_b, d_joint)
        self.logit_scale = nn.Parameter(torch.tensor(2.0))

    def forward(self, a, b):
        za = F.normalize(self.proj_a(a), dim=-1)
        zb = F.normalize(self.proj_b(b), dim=-1)
        logits = self.logit_scale.exp() * za @ zb.T  # (N, N) similarity matrix
        labels = torch.arange(a.size(0))
        return (F.cross_entropy(logits, labels) + F.cross_entropy(logits.T, labels)) / 2


data = torch.randn(256, 8)
encoder = Encoder()
optimizer = torch.optim.Adam(encoder.parameters(), lr=3e-3)
for step in range(40):
    batch = data[torch.randint(0, len(data), (64,))]
    loss = nt_xent(encoder(augment(batch)), encoder(augment(batch)))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if step % 10 == 0:
        print(f"ntxent step {step}: {loss.item():.4f}")

# paired "image" / "text" features: b is a noisy linear function of a
a = torch.randn(128, 8)
b = a @ torch.randn(8, 12) + 0.1 * torch.randn(128, 12)
head = CLIPHead(8, 12)
optimizer = torch.optim.Adam(head.parameters(), lr=1e-2)
for step in range(40):
    loss = head(a, b)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
with torch.no_grad():
    za = F.normalize(head.proj_a(a), dim=-1)
    zb = F.normalize(head.proj_b(b), dim=-1)
    top1 = ((za @ zb.T).argmax(dim=1) == torch.arange(len(a))).float().mean()
print(f"clip loss {loss.item():.4f}, retrieval top-1 {top1.item():.3f}")
