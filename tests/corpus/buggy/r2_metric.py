"""Correct training, wrong evaluation; bug: in the R^2 score y_val (N,) - pred (N, 1) is (N, N), reduced to a scalar, and R^2 comes out negative."""

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


def make_data(n):
    x = torch.rand(n, 3) * 2 - 1
    y = 3 * x[:, 0] - 2 * x[:, 1] ** 2 + 0.5 * x[:, 2] + 0.1 * torch.randn(n)
    return x, y


def r2_score(pred, y_val):
    ss_res = ((y_val - pred) ** 2).sum()  # expect: broadcast
    ss_tot = ((y_val - y_val.mean()) ** 2).sum()
    return 1 - ss_res / ss_tot


x_train, y_train = make_data(400)
x_val, y_val = make_data(100)
model = nn.Sequential(nn.Linear(3, 32), nn.ReLU(), nn.Linear(32, 1))
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)

for epoch in range(100):
    loss = F.mse_loss(model(x_train).squeeze(-1), y_train)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()

model.eval()
with torch.no_grad():
    pred = model(x_val)
    val_mse = F.mse_loss(pred.squeeze(-1), y_val)
    r2 = r2_score(pred, y_val)
print(f"train mse {loss.item():.4f} val mse {val_mse.item():.4f} val R^2 {r2.item():.3f}")
