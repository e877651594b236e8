"""torch.compile on a tiny regression MLP, checked against the eager module (clean; SLOW: inductor compiles for tens of seconds on a small CPU)."""

import time

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class TinyMLP(nn.Module):
    def __init__(self, d_in=4, hidden=16):
        super().__init__()
        self.fc1 = nn.Linear(d_in, hidden)
        self.fc2 = nn.Linear(hidden, 1)

    def forward(self, x):
        return self.fc2(torch.tanh(self.fc1(x)))


x = torch.randn(64, 4)
y = (x[:, :1] * 2.0 - x[:, 1:2] + 0.5 * x[:, 2:3] * x[:, 3:4]).detach()  # (64, 1)

model = TinyMLP()
compiled = torch.compile(model)

optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
t0 = time.time()
for step in range(30):
    pred = compiled(x)
    if step == 0:
        print(f"first compiled call took {time.time() - t0:.1f}s")
    loss = F.mse_loss(pred, y)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
    if step % 10 == 0:
        print(f"step {step}: loss {loss.item():.4f}")
print(f"final loss {loss.item():.4f}")

# the compiled module shares its parameters with the eager one
assert torch.allclose(model(x), compiled(x), atol=1e-5)
