"""A pytorch/examples-style MNIST CNN with every activation's shape in a comment: two conv blocks with max-pooling, dropout, a flatten into the classifier, a DataLoader over synthetic 28x28 digits whose last batch is smaller, an eval pass with accuracy (clean)."""

import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset


class Net(nn.Module):
    def __init__(self, channels=16, num_classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(1, channels, 3, padding=1)
        self.conv2 = nn.Conv2d(channels, 2 * channels, 3, padding=1)
        self.dropout = nn.Dropout(0.25)
        self.fc1 = nn.Linear(2 * channels * 7 * 7, 64)
        self.fc2 = nn.Linear(64, num_classes)
        self.channels = channels

    def forward(self, x):  # x: [N, 1, 28, 28]
        x = F.relu(self.conv1(x))  # (N, channels, 28, 28)
        x = F.max_pool2d(x, 2)  # (N, channels, 14, 14)
        x = F.relu(self.conv2(x))  # (N, 2 * channels, 14, 14)
        x = F.max_pool2d(x, 2)  # (N, 2 * channels, 7, 7)
        x = self.dropout(x)
        x = torch.flatten(x, 1)  # (N, 2*channels*7*7)
        x = F.relu(self.fc1(x))  # (N, 64)
        return self.fc2(x)  # (N, num_classes)


def make_data(n, generator):
    images = torch.rand(n, 1, 28, 28, generator=generator)  # (n, 1, 28, 28)
    labels = torch.randint(0, 10, (n,), generator=generator)  # (n,)
    return TensorDataset(images, labels)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--epochs", type=int, default=1)
    args = parser.parse_args()
    generator = torch.Generator().manual_seed(1)
    train = DataLoader(make_data(200, generator), batch_size=args.batch_size, shuffle=True)
    test = DataLoader(make_data(70, generator), batch_size=args.batch_size)
    model = Net()
    optimizer = torch.optim.Adadelta(model.parameters(), lr=1.0)
    for epoch in range(args.epochs):
        model.train()
        for data, target in train:
            optimizer.zero_grad()
            output = model(data)  # (batch_size, 10)
            loss = F.cross_entropy(output, target)
            loss.backward()
            optimizer.step()
    model.eval()
    correct = 0
    with torch.no_grad():
        for data, target in test:
            output = model(data)  # (N, 10)
            pred = output.argmax(dim=1, keepdim=True)  # (N, 1)
            correct += pred.eq(target.view_as(pred)).sum().item()
    print(f"accuracy {correct / len(test.dataset):.2f}")


if __name__ == "__main__":
    main()
