"""GRU with attention pooling; bug: F.softmax(scores) without dim on (B, T, 1) warns (implicit dim) and normalises over the batch instead of time."""

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class AttentionPooling(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.score = nn.Linear(hidden, 1)

    def forward(self, h):
        scores = self.score(h)  # (B, T, 1)
        weights = F.softmax(scores)  # expect: library_warning
        return (weights * h).sum(dim=1)  # (B, H)


class Regressor(nn.Module):
    def __init__(self, n_features=3, hidden=32):
        super().__init__()
        self.gru = nn.GRU(n_features, hidden, batch_first=True)
        self.pool = AttentionPooling(hidden)
        self.head = nn.Linear(hidden, 1)

    def forward(self, x):
        h, _ = self.gru(x)
        return self.head(self.pool(h)).squeeze(-1)


def make_batch(batch_size, steps=20):
    """Target: the value of feature 0 at the single time step where feature 1 is set."""
    x = torch.randn(batch_size, steps, 3)
    x[:, :, 1] = 0.0
    where = torch.randint(0, steps, (batch_size,))
    x[torch.arange(batch_size), where, 1] = 1.0
    y = x[torch.arange(batch_size), where, 0]
    return x, y


model = Regressor()
optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
for step in range(60):
    x, y = make_batch(32)
    loss = F.mse_loss(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if step % 20 == 0:
        print(f"step {step}: loss {loss.item():.4f}")
print(f"final loss {loss.item():.4f}")
