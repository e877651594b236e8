"""Rectified-flow / flow-matching toy on 2-D moons: t ~ U(0, 1) as an (N, 1) column, Fourier time features t * freqs, Euler sampling, grid from torch.meshgrid (clean)."""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


def two_moons(n):
    angle = torch.rand(n) * math.pi
    upper = torch.rand(n) < 0.5
    x = torch.where(upper, torch.cos(angle), 1 - torch.cos(angle))
    y = torch.where(upper, torch.sin(angle), 0.5 - torch.sin(angle))
    return torch.stack([x, y], dim=1) + 0.05 * torch.randn(n, 2)


class VelocityField(nn.Module):
    def __init__(self, n_freqs=8, hidden=64):
        super().__init__()
        self.register_buffer("freqs", torch.arange(1, n_freqs + 1) * math.pi)  # (F,)
        self.net = nn.Sequential(
            nn.Linear(2 + 2 * n_freqs, hidden), nn.SiLU(),
            nn.Linear(hidden, hidden), nn.SiLU(),
            nn.Linear(hidden, 2),
        )

    def forward(self, x, t):
        # t is (N, 1): every sample gets every frequency
        angles = t * self.freqs  # (N, F)
        features = torch.cat([x, torch.sin(angles), torch.cos(angles)], dim=1)
        return self.net(features)


model = VelocityField()
optimizer = torch.optim.Adam(model.parameters(), lr=2e-3)
for step in range(200):
    x1 = two_moons(256)
    x0 = torch.randn_like(x1)
    t = torch.rand(x1.size(0), 1)
    xt = (1 - t) * x0 + t * x1  # (N, 1) * (N, 2)
    loss = F.mse_loss(model(xt, t), x1 - x0)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if step % 50 == 0:
        print(f"step {step}: loss {loss.item():.4f}")


@torch.no_grad()
def sample(n, steps=20):
    x = torch.randn(n, 2)
    for i in range(steps):
        t = torch.full((n, 1), i / steps)
        x = x + model(x, t) / steps
    return x


samples = sample(512)
# how much of the sample mass lands near the data: a coarse 2-D histogram on a grid
xs, ys = torch.linspace(-1.5, 2.5, 9), torch.linspace(-1.0, 1.5, 6)
grid_x, grid_y = torch.meshgrid(xs, ys)
centres = torch.stack([grid_x.reshape(-1), grid_y.reshape(-1)], dim=1)  # (G, 2)
nearest = torch.cdist(samples, centres).argmin(dim=1)
counts = torch.bincount(nearest, minlength=len(centres))
data_cells = torch.bincount(torch.cdist(two_moons(512), centres).argmin(dim=1),
                            minlength=len(centres)) > 0
print(f"final loss {loss.item():.4f}; samples in cells the data occupies: "
      f"{counts[data_cells].sum().item() / len(samples):.2f}")
