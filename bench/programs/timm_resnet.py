"""A timm ResNet-18 (no pretrained weights) trained for a few steps on random images."""

import argparse

import timm
import torch
from torch import nn


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--image-size", type=int, default=64)
    args = parser.parse_args()

    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = timm.create_model("resnet18", pretrained=False, num_classes=10)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    criterion = nn.CrossEntropyLoss()
    model.train()
    for step in range(args.steps):
        images = torch.randn(args.batch_size, 3, args.image_size, args.image_size)
        labels = torch.randint(0, 10, (args.batch_size,))
        loss = criterion(model(images), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(f"step {step} loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
