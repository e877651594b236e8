"""An MLP classifier: one AdamW step (memory accuracy bench)."""

import torch
import torch.nn as nn

model = nn.Sequential(
    nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10)
)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
x = torch.randn(128, 784)
y = torch.randint(0, 10, (128,))
loss = nn.functional.cross_entropy(model(x), y)
loss.backward()
opt.step()
opt.zero_grad(set_to_none=True)
