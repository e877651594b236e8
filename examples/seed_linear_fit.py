"""The seed story's example 2: fitting y = x1 + 2*x2 + 3 stalls at a loss of ~1.5.

`y` is (4,) but `pred` is (4, 1): `y - pred` silently broadcasts to (4, 4).
`shapelens run examples/seed_linear_fit.py` points at the line.
The fix is `pred = model(x).squeeze()`.
"""

import torch

model = torch.nn.Linear(2, 1)

x = torch.tensor([[0.0, 0.0], [0.0, 1.0], [1.0, 0.0], [1.0, 1.0]])
y = torch.tensor([3.0, 5.0, 4.0, 6.0])

optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(10):
    optimizer.zero_grad()
    pred = model(x)
    squared_diff = (y - pred) ** 2
    loss = squared_diff.mean()
    print(loss.item())
    loss.backward()
    optimizer.step()
