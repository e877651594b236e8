"""Regression on a Dataset of dicts; bug: preds (B, 1) - batch['target'] (B,) broadcasts to (B, B) inside the squared error."""

import math

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset


class EnergyDataset(Dataset):
    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        self.hour = torch.randint(0, 24, (n,), generator=g)
        self.temp = 15 + 10 * torch.randn(n, generator=g)
        self.load = (
            2.0
            + torch.sin(self.hour.float() / 24 * 2 * math.pi)
            + 0.05 * (self.temp - 15).abs()
            + 0.1 * torch.randn(n, generator=g)
        )

    def __len__(self):
        return len(self.load)

    def __getitem__(self, i):
        angle = self.hour[i].float() / 24 * 2 * math.pi
        features = torch.stack([torch.sin(angle), torch.cos(angle), (self.temp[i] - 15) / 10])
        return {"features": features, "target": self.load[i]}


torch.manual_seed(0)
train_loader = DataLoader(EnergyDataset(512, seed=0), batch_size=64, shuffle=True)
model = nn.Sequential(nn.Linear(3, 32), nn.ReLU(), nn.Linear(32, 1))
optimizer = torch.optim.Adam(model.parameters(), lr=5e-3)

for epoch in range(6):
    total = 0.0
    for batch in train_loader:
        preds = model(batch["features"])
        loss = (preds - batch["target"]).pow(2).mean()  # expect: broadcast
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total += loss.item()
    print(f"epoch {epoch}: loss {total / len(train_loader):.4f}")
