"""Wine-quality regression (main.py + data.py); bug: data.py's float64 numpy arrays stay float64 through torch.from_numpy and meet float32 weights."""

import torch
import torch.nn as nn
from data import make_loaders

torch.manual_seed(0)
train_loader, valid_loader = make_loaders()
model = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 1))
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
loss_fn = nn.MSELoss()

for epoch in range(5):
    model.train()
    for xb, yb in train_loader:
        pred = model(xb)  # expect: dtype_mismatch
        loss = loss_fn(pred, yb)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.eval()
    with torch.no_grad():
        val = sum(loss_fn(model(xb), yb).item() * len(xb) for xb, yb in valid_loader)
    print(f"epoch {epoch}: val mse {val / len(valid_loader.dataset):.4f}")
