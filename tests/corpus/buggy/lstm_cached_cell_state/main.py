"""Multi-sensor load forecasting with an LSTM whose initial hidden state is learned (main.py + model.py + data.py); bug in model.py: the zero cell state c0 is allocated once, on the first call, with that batch's size (16) and cached, so the last batch of the epoch (4 windows: 100 windows, drop_last=False) gets an (h0, c0) tuple whose h0 is (2, 4, 32) and whose c0 is still (2, 16, 32)."""

import argparse

import torch
import torch.nn as nn
from data import make_loaders
from model import Forecaster


def train_epoch(model, loader, criterion, optimizer):
    model.train()
    total = 0.0
    for windows, target in loader:
        optimizer.zero_grad()
        pred = model(windows)
        loss = criterion(pred, target)
        loss.backward()
        optimizer.step()
        total += loss.item() * len(windows)
    return total / len(loader.dataset)


@torch.no_grad()
def evaluate(model, loader, criterion):
    model.eval()
    total = 0.0
    for windows, target in loader:
        total += criterion(model(windows), target).item() * len(windows)
    return total / len(loader.dataset)


def main():
    parser = argparse.ArgumentParser(description="LSTM load forecasting")
    parser.add_argument("--window", type=int, default=24)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--lr", type=float, default=5e-3)
    args = parser.parse_args()

    torch.manual_seed(42)
    train_loader, val_loader = make_loaders(args.window, args.batch_size)
    model = Forecaster(n_sensors=4, hidden_size=32, num_layers=2)
    criterion = nn.MSELoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    for epoch in range(1, args.epochs + 1):
        train_loss = train_epoch(model, train_loader, criterion, optimizer)
        val_loss = evaluate(model, val_loader, criterion)
        print(f"Epoch {epoch:02d} | train MSE {train_loss:.4f} | val MSE {val_loss:.4f}")


if __name__ == "__main__":
    main()
