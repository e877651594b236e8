"""Fashion-MNIST-style MLP with a held-out evaluation; bug: the accuracy helper compares pred.eq(target) without target.view_as(pred) (as in the pytorch/examples mnist test loop): (B, 1) against (B,) is a (B, B) matrix, so `correct` counts every pair."""

from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset, random_split


@dataclass
class Config:
    classes: int = 10
    hidden: int = 64
    batch_size: int = 32
    epochs: int = 3
    lr: float = 0.1
    seed: int = 0


def clothing_images(n, classes, generator):
    """Each class lights a different vertical stripe of a 28x28 image, plus noise."""
    labels = torch.randint(0, classes, (n,), generator=generator)
    images = torch.rand(n, 28, 28, generator=generator) * 0.4
    for i, label in enumerate(labels.tolist()):
        images[i, :, 2 + 2 * label : 5 + 2 * label] += 0.6
    return TensorDataset(images, labels)


class Classifier(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.net = nn.Sequential(
            nn.Flatten(), nn.Linear(28 * 28, cfg.hidden), nn.ReLU(), nn.Linear(cfg.hidden, cfg.classes)
        )

    def forward(self, images):
        return self.net(images)


def count_correct(output, target):
    pred = output.argmax(dim=1, keepdim=True)
    return pred.eq(target).sum().item()  # expect: broadcast


def evaluate(model, loader):
    model.eval()
    correct, total_loss = 0, 0.0
    with torch.no_grad():
        for images, target in loader:
            output = model(images)
            total_loss += F.cross_entropy(output, target, reduction="sum").item()
            correct += count_correct(output, target)
    return total_loss / len(loader.dataset), correct / len(loader.dataset)


cfg = Config()
torch.manual_seed(cfg.seed)
dataset = clothing_images(320, cfg.classes, torch.Generator().manual_seed(cfg.seed))
train_set, val_set = random_split(dataset, [256, 64], generator=torch.Generator().manual_seed(1))
train_loader = DataLoader(train_set, batch_size=cfg.batch_size, shuffle=True)
val_loader = DataLoader(val_set, batch_size=64)
model = Classifier(cfg)
optimizer = torch.optim.SGD(model.parameters(), lr=cfg.lr, momentum=0.9)

for epoch in range(cfg.epochs):
    model.train()
    for images, target in train_loader:
        loss = F.cross_entropy(model(images), target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    val_loss, val_acc = evaluate(model, val_loader)
    print(f"epoch {epoch}: train loss {loss.item():.3f} val loss {val_loss:.3f} val acc {val_acc:.2%}")
