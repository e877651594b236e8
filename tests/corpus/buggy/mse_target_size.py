"""Sliding-window forecasting of a noisy sine; bug: F.mse_loss(pred (32, 1), target (32,)) warns about the target size and broadcasts to (32, 32)."""

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)

WINDOW = 16
t = torch.arange(0, 600, dtype=torch.float32)
series = torch.sin(t * 0.1) + 0.5 * torch.sin(t * 0.037) + 0.05 * torch.randn(len(t))

windows = series.unfold(0, WINDOW + 1, 1)  # (N, WINDOW + 1)
inputs, targets = windows[:, :WINDOW], windows[:, WINDOW]  # (N, WINDOW), (N,)
split = int(0.8 * len(inputs))
train_loader = DataLoader(TensorDataset(inputs[:split], targets[:split]), batch_size=32,
                          shuffle=True, drop_last=True)

model = nn.Sequential(nn.Linear(WINDOW, 64), nn.ReLU(), nn.Linear(64, 1))
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)

for epoch in range(4):
    running = 0.0
    for window, target in train_loader:
        pred = model(window)
        loss = F.mse_loss(pred, target)  # expect: library_warning
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        running += loss.item()
    with torch.no_grad():
        val_pred = model(inputs[split:]).squeeze(1)
        val_mse = F.mse_loss(val_pred, targets[split:])
    print(f"epoch {epoch}: train {running / len(train_loader):.4f} val {val_mse.item():.4f}")
