"""Full-batch regression where the targets were reshaped to a column `.view(-1, 1)` and the predictions squeezed to (N,); bug: `pred - y` is (N,) - (N, 1) -> (N, N) and the fit is wrong."""

import numpy as np
import torch
import torch.nn as nn

rng = np.random.default_rng(1)
torch.manual_seed(1)

# concrete strength (MPa) from cement, water and age; a column vector target, sklearn-style
n = 300
cement = rng.uniform(100, 500, n)
water = rng.uniform(120, 250, n)
age = rng.integers(1, 365, n)
strength = 0.08 * cement - 0.15 * water + 8 * np.log(age) + rng.normal(0, 2, n)

X = np.column_stack([cement, water, np.log(age)])
X = (X - X.mean(axis=0)) / X.std(axis=0)
X = torch.tensor(X, dtype=torch.float32)
y = torch.tensor(strength, dtype=torch.float32).view(-1, 1)

model = nn.Sequential(nn.Linear(3, 16), nn.ReLU(), nn.Linear(16, 1))
optimizer = torch.optim.Adam(model.parameters(), lr=0.05)
for epoch in range(150):
    pred = model(X).squeeze()
    loss = ((pred - y) ** 2).mean()  # expect: broadcast
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if epoch % 50 == 0:
        print(f"epoch {epoch}: mse {loss.item():.3f}")

with torch.no_grad():
    rmse = (model(X) - y).pow(2).mean().sqrt()
print(f"final rmse {rmse.item():.3f} MPa (noise level 2.0, target std {y.std().item():.2f})")
