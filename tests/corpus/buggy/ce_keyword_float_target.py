"""Multi-class classifier on a make_classification-style numpy dataset (standardised features, a train/validation split, a Dataset + DataLoader, label smoothing, early stopping on validation accuracy); bug: the labels are turned into tensors with torch.from_numpy(y).float() like the features, and F.cross_entropy(input=logits, target=labels, ...) gets float class indices."""

import argparse

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset


def make_classification(n_samples, n_features, n_classes, rng):
    centers = rng.normal(scale=2.0, size=(n_classes, n_features))
    y = rng.integers(0, n_classes, n_samples)
    X = centers[y] + rng.normal(size=(n_samples, n_features))
    return X, y


class TabularDataset(Dataset):
    def __init__(self, X, y):
        self.features = torch.from_numpy(X).float()
        self.labels = torch.from_numpy(y).float()  # cause: dtype_mismatch

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, idx):
        return self.features[idx], self.labels[idx]


class Classifier(nn.Module):
    def __init__(self, in_features, n_classes, hidden=64, p_drop=0.1):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(in_features, hidden), nn.BatchNorm1d(hidden), nn.ReLU(), nn.Dropout(p_drop),
            nn.Linear(hidden, hidden), nn.ReLU(),
            nn.Linear(hidden, n_classes),
        )

    def forward(self, x):
        return self.net(x)


def train_one_epoch(model, loader, optimizer, label_smoothing):
    model.train()
    running = 0.0
    for features, labels in loader:
        logits = model(features)
        loss = F.cross_entropy(input=logits, target=labels, label_smoothing=label_smoothing)  # expect: dtype_mismatch
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        running += loss.item()
    return running / len(loader)


@torch.no_grad()
def accuracy(model, loader):
    model.eval()
    correct = sum((model(x).argmax(1) == y.long()).sum().item() for x, y in loader)
    return correct / len(loader.dataset)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--label-smoothing", type=float, default=0.1)
    parser.add_argument("--patience", type=int, default=3)
    args = parser.parse_args()

    rng = np.random.default_rng(7)
    torch.manual_seed(7)
    X, y = make_classification(600, n_features=10, n_classes=5, rng=rng)
    X = (X - X.mean(axis=0)) / X.std(axis=0)
    split = int(0.8 * len(X))
    train_loader = DataLoader(TabularDataset(X[:split], y[:split]), batch_size=args.batch_size, shuffle=True)
    val_loader = DataLoader(TabularDataset(X[split:], y[split:]), batch_size=128)

    model = Classifier(10, 5)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    best, bad_epochs = 0.0, 0
    for epoch in range(args.epochs):
        loss = train_one_epoch(model, train_loader, optimizer, args.label_smoothing)
        acc = accuracy(model, val_loader)
        print(f"epoch {epoch}: train loss {loss:.4f} val acc {acc:.3f}")
        if acc > best:
            best, bad_epochs = acc, 0
        else:
            bad_epochs += 1
            if bad_epochs >= args.patience:
                print("early stopping")
                break


if __name__ == "__main__":
    main()
