"""Household energy-use regression (a Dataset of numpy rows whose target is a scalar per item, a DataLoader, separate train_one_epoch() and evaluate() functions with F.mse_loss, ReduceLROnPlateau on the validation loss); bug: the model outputs (B, 1) and the collated targets are (B,), so both the training loss and the validation loss warn about the target size (different sizes: 32 and 50) and broadcast to (B, B)."""

import argparse

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset


class EnergyUse(Dataset):
    """Rows of (outdoor temp, hour sin/cos, occupants, floor area) -> kWh in the next hour."""

    def __init__(self, n, seed):
        rng = np.random.default_rng(seed)
        temp = rng.uniform(-5, 30, n)
        hour = rng.integers(0, 24, n)
        occupants = rng.integers(1, 6, n)
        area = rng.uniform(40, 200, n)
        kwh = 0.02 * area + 0.3 * occupants + 0.05 * np.abs(temp - 18) + 0.4 * np.sin(hour / 24 * 2 * np.pi) + rng.normal(0, 0.1, n)
        x = np.stack([temp / 30, np.sin(hour / 24 * 2 * np.pi), np.cos(hour / 24 * 2 * np.pi), occupants / 5, area / 200], axis=1)
        self.x = x.astype(np.float32)
        self.y = kwh.astype(np.float32)

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return torch.from_numpy(self.x[i]), torch.tensor(self.y[i])


def train_one_epoch(model, loader, optimizer):
    model.train()
    total = 0.0
    for x, y in loader:
        optimizer.zero_grad()
        loss = F.mse_loss(model(x), y)  # expect: library_warning
        loss.backward()
        optimizer.step()
        total += loss.item() * len(y)
    return total / len(loader.dataset)


@torch.no_grad()
def evaluate(model, loader):
    model.eval()
    total = 0.0
    for x, y in loader:
        total += F.mse_loss(model(x), y, reduction="sum").item()  # expect: library_warning
    return total / len(loader.dataset)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=8)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=3e-3)
    args = parser.parse_args()

    torch.manual_seed(0)
    train_loader = DataLoader(EnergyUse(256, seed=0), batch_size=args.batch_size, shuffle=True)
    val_loader = DataLoader(EnergyUse(100, seed=1), batch_size=50)
    model = nn.Sequential(nn.Linear(5, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 1))
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, patience=2)
    for epoch in range(args.epochs):
        train_loss = train_one_epoch(model, train_loader, optimizer)
        val_loss = evaluate(model, val_loader)
        scheduler.step(val_loss)
        print(f"epoch {epoch}: train {train_loss:.4f} val {val_loss:.4f} lr {optimizer.param_groups[0]['lr']:.0e}")


if __name__ == "__main__":
    main()
