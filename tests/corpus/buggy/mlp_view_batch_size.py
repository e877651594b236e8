"""Fashion-MNIST-style MLP classifier (argparse, Dataset + DataLoader, Adam, an eval loop) on synthetic 28x28 garments; bug: forward() flattens with x.view(self.batch_size, -1), right for the full batches of 16, but the last batch of the epoch holds 4 images (100 samples, drop_last=False): view silently makes the (4, 1, 28, 28) batch 16 rows of 196, and fc1, built for 784 features, fails."""

import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset


class SyntheticFashion(Dataset):
    """Grayscale 'garments': horizontal stripes whose frequency depends on the class, plus noise."""

    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        self.labels = torch.randint(0, 10, (n,), generator=g)
        rows = torch.arange(28, dtype=torch.float32).view(1, 28, 1)
        freq = 0.2 + 0.1 * self.labels.float().view(-1, 1, 1)
        stripes = torch.sin(rows * freq).expand(n, 28, 28)
        noise = 0.3 * torch.randn(n, 28, 28, generator=g)
        self.images = (stripes + noise).unsqueeze(1)

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, idx):
        return self.images[idx], self.labels[idx]


class MLP(nn.Module):
    def __init__(self, batch_size, hidden=128, num_classes=10):
        super().__init__()
        self.batch_size = batch_size
        self.fc1 = nn.Linear(28 * 28, hidden)
        self.fc2 = nn.Linear(hidden, hidden)
        self.fc3 = nn.Linear(hidden, num_classes)
        self.dropout = nn.Dropout(0.2)

    def forward(self, x):
        x = x.view(self.batch_size, -1)  # cause: shape_mismatch
        x = self.dropout(F.relu(self.fc1(x)))  # expect: shape_mismatch
        x = self.dropout(F.relu(self.fc2(x)))
        return self.fc3(x)


def train(model, loader, optimizer, epoch, log_interval):
    model.train()
    for batch_idx, (data, target) in enumerate(loader):
        optimizer.zero_grad()
        output = model(data)
        loss = F.cross_entropy(output, target)
        loss.backward()
        optimizer.step()
        if batch_idx % log_interval == 0:
            print(f"Train Epoch: {epoch} [{batch_idx * len(data)}/{len(loader.dataset)}]\tLoss: {loss.item():.6f}")


def evaluate(model, loader):
    model.eval()
    correct, total_loss = 0, 0.0
    with torch.no_grad():
        for data, target in loader:
            output = model(data)
            total_loss += F.cross_entropy(output, target, reduction="sum").item()
            correct += (output.argmax(dim=1) == target).sum().item()
    n = len(loader.dataset)
    print(f"Test set: Average loss: {total_loss / n:.4f}, Accuracy: {correct}/{n}")


def main():
    parser = argparse.ArgumentParser(description="MLP on synthetic Fashion-MNIST")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--log-interval", type=int, default=2)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()

    torch.manual_seed(args.seed)
    train_loader = DataLoader(SyntheticFashion(100, seed=0), batch_size=args.batch_size,
                              shuffle=True, drop_last=False)
    test_loader = DataLoader(SyntheticFashion(48, seed=1), batch_size=args.batch_size)
    model = MLP(args.batch_size)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    for epoch in range(1, args.epochs + 1):
        train(model, train_loader, optimizer, epoch, args.log_interval)
        evaluate(model, test_loader)


if __name__ == "__main__":
    main()
