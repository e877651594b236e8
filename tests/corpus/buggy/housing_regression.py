"""House-price regression from numpy through a DataLoader; bug: pred (B, 1) - yb (B,) broadcasts to (B, B) in the MSE and the loss stalls."""

import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

rng = np.random.default_rng(42)
torch.manual_seed(42)

# columns: rooms, area (100 m^2), age (decades), distance to centre (km)
n = 512
features = np.column_stack([
    rng.integers(1, 7, n),
    rng.uniform(0.3, 2.5, n),
    rng.uniform(0.0, 8.0, n),
    rng.uniform(0.5, 30.0, n),
]).astype(np.float32)
price = (50 + 20 * features[:, 0] + 120 * features[:, 1] - 4 * features[:, 2]
         - 2.5 * features[:, 3] + rng.normal(0, 10, n)).astype(np.float32)

mu, sigma = features.mean(axis=0), features.std(axis=0)
X = torch.from_numpy((features - mu) / sigma)
y = torch.from_numpy((price - price.mean()) / price.std())  # (N,)

loader = DataLoader(TensorDataset(X, y), batch_size=64, shuffle=True, num_workers=0)
model = nn.Sequential(nn.Linear(4, 32), nn.ReLU(), nn.Linear(32, 1))
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)

for epoch in range(10):
    epoch_loss = 0.0
    for xb, yb in loader:
        pred = model(xb)
        loss = ((pred - yb) ** 2).mean()  # expect: broadcast
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        epoch_loss += loss.item() * len(xb)
    if epoch % 3 == 0:
        print(f"epoch {epoch}: mse {epoch_loss / len(X):.4f}")

with torch.no_grad():
    r2 = 1 - ((model(X).squeeze(1) - y) ** 2).mean() / y.var()
print(f"R^2 on the training set: {r2.item():.3f}")
