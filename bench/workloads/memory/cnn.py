"""A small CNN on 32×32 images: one AdamW step (memory accuracy bench)."""

import torch
import torch.nn as nn

model = nn.Sequential(
    nn.Conv2d(3, 32, 3, padding=1),
    nn.BatchNorm2d(32),
    nn.ReLU(),
    nn.MaxPool2d(2),
    nn.Conv2d(32, 64, 3, padding=1),
    nn.BatchNorm2d(64),
    nn.ReLU(),
    nn.MaxPool2d(2),
    nn.Flatten(),
    nn.Linear(64 * 8 * 8, 10),
)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
images = torch.randn(32, 3, 32, 32)
labels = torch.randint(0, 10, (32,))
loss = nn.functional.cross_entropy(model(images), labels)
loss.backward()
opt.step()
opt.zero_grad(set_to_none=True)
