"""A small AlexNet (torchvision's layout: features, AdaptiveAvgPool2d, a classifier whose first Linear takes 64 * 6 * 6) on synthetic 32x32 images, with a config dataclass (main.py + model.py); bug: the config's pool_size was lowered to 4 to save memory, the classifier still expects 6x6 maps, and forward()'s self.avgpool(x) makes the (B, 64, 4, 4) features that flatten to 1024 instead of 2304."""

import argparse
from dataclasses import dataclass

import torch
import torch.nn as nn
from model import SmallAlexNet
from torch.utils.data import DataLoader, TensorDataset


@dataclass
class TrainConfig:
    num_classes: int = 5
    pool_size: int = 4
    dropout: float = 0.5
    batch_size: int = 32
    epochs: int = 2
    lr: float = 0.01
    momentum: float = 0.9


def synthetic_images(n, num_classes, generator):
    labels = torch.randint(0, num_classes, (n,), generator=generator)
    images = torch.rand(n, 3, 32, 32, generator=generator)
    images[:, 0] += 0.2 * labels.view(-1, 1, 1).float()  # the red channel encodes the class
    return TensorDataset(images, labels)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=TrainConfig.epochs)
    parser.add_argument("--lr", type=float, default=TrainConfig.lr)
    args = parser.parse_args()
    cfg = TrainConfig(epochs=args.epochs, lr=args.lr)

    g = torch.Generator().manual_seed(0)
    torch.manual_seed(0)
    train_loader = DataLoader(synthetic_images(160, cfg.num_classes, g), batch_size=cfg.batch_size, shuffle=True)
    val_loader = DataLoader(synthetic_images(64, cfg.num_classes, g), batch_size=cfg.batch_size)
    model = SmallAlexNet(cfg)
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=cfg.lr, momentum=cfg.momentum)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)

    for epoch in range(cfg.epochs):
        model.train()
        for i, (images, target) in enumerate(train_loader):
            output = model(images)
            loss = criterion(output, target)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if i % 2 == 0:
                print(f"Epoch [{epoch}][{i}/{len(train_loader)}] Loss {loss.item():.4f}")
        scheduler.step()
        model.eval()
        correct = 0
        with torch.no_grad():
            for images, target in val_loader:
                correct += (model(images).argmax(1) == target).sum().item()
        print(f" * Acc@1 {100 * correct / len(val_loader.dataset):.2f}")


if __name__ == "__main__":
    main()
