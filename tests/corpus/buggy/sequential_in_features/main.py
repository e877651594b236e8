"""Small VGG-style CIFAR classifier with a config dataclass (main.py + model.py); bug in model.py: the classifier's first Linear, declared inside a multi-line nn.Sequential(, expects 64*8*8 inputs, but three poolings leave 64*4*4."""

from dataclasses import dataclass

import torch
import torch.nn as nn
from model import SmallVGG
from torch.utils.data import DataLoader, TensorDataset


@dataclass
class Config:
    image_size: int = 32
    num_classes: int = 10
    batch_size: int = 32
    epochs: int = 2
    lr: float = 0.05
    momentum: float = 0.9


def synthetic_cifar(n, size, num_classes):
    labels = torch.randint(0, num_classes, (n,))
    images = torch.randn(n, 3, size, size) * 0.5 + labels.view(-1, 1, 1, 1) / num_classes
    return images, labels


cfg = Config()
torch.manual_seed(0)
images, labels = synthetic_cifar(128, cfg.image_size, cfg.num_classes)
loader = DataLoader(TensorDataset(images, labels), batch_size=cfg.batch_size, shuffle=True)
model = SmallVGG(cfg.num_classes)
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=cfg.lr, momentum=cfg.momentum)

for epoch in range(cfg.epochs):
    correct = 0
    for x, y in loader:
        out = model(x)
        loss = criterion(out, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        correct += (out.argmax(dim=1) == y).sum().item()
    print(f"epoch {epoch}: loss {loss.item():.3f}, train acc {correct / len(images):.2f}")
