"""Linear regression on unnormalised features (m^2, years); bug: SGD lr=0.01 is far too large, the MSE overflows to inf at step 8, then NaN."""

import torch
import torch.nn as nn

torch.manual_seed(0)

n = 200
area = torch.rand(n, 1) * 150 + 30  # m^2
year = torch.rand(n, 1) * 60 + 1960
x = torch.cat([area, year - 1960], dim=1)  # (N, 2), raw units
price = 10 * area + 3 * (year - 1960) + torch.randn(n, 1)  # (N, 1), in thousands

model = nn.Linear(2, 1)
criterion = nn.MSELoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)

for step in range(1, 21):
    pred = model(x)
    loss = criterion(pred, price)  # expect: nonfinite
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step}: loss {loss.item():.4g}")

print("weights:", model.weight.data.tolist(), "bias:", model.bias.data.tolist())
