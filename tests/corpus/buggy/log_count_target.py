"""Bike-rental demand regression on a log scale; bug: torch.log(counts) instead of torch.log1p(counts), and the night hours with zero rentals give -inf targets, so the loss is inf and then NaN."""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)

# one row per hour over 40 days: hour of day, temperature, is_weekend
n_hours = 24 * 40
hour = torch.arange(n_hours) % 24
day = torch.arange(n_hours) // 24
temperature = 12 + 8 * torch.sin(2 * math.pi * (hour - 9) / 24) + 3 * torch.randn(n_hours)
weekend = ((day % 7) >= 5).float()
rate = torch.exp(1.0 + 2.5 * torch.exp(-((hour - 17.0) ** 2) / 8) + 0.04 * temperature
                 - 0.5 * weekend)
rate[(hour >= 1) & (hour <= 4)] = 0.05  # almost nobody rents a bike at night
counts = torch.poisson(rate)

features = torch.stack([
    torch.sin(2 * math.pi * hour / 24), torch.cos(2 * math.pi * hour / 24),
    (temperature - temperature.mean()) / temperature.std(), weekend,
], dim=1)
log_counts = torch.log(counts)  # expect: nonfinite

model = nn.Sequential(nn.Linear(4, 32), nn.ReLU(), nn.Linear(32, 1))
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
for epoch in range(30):
    perm = torch.randperm(n_hours)
    for i in range(0, n_hours, 96):
        idx = perm[i : i + 96]
        loss = F.mse_loss(model(features[idx]).squeeze(1), log_counts[idx])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    if epoch % 10 == 0:
        print(f"epoch {epoch}: loss {loss.item():.4f}")
