"""Gesture recognition from variable-length accelerometer traces (main.py + model.py): pad_sequence in a collate_fn, a GRU called with keyword arguments model(x=..., lengths=...), and its last valid output gathered per sequence; bug in model.py: the last valid step is out[torch.arange(B), lengths] instead of lengths - 1, one past the end, and the longest sequence of the batch (whose length is the padded length) indexes out of bounds."""

import argparse

import torch
import torch.nn as nn
from model import GestureGRU
from torch.nn.utils.rnn import pad_sequence
from torch.utils.data import DataLoader, Dataset


class GestureTraces(Dataset):
    """(length, 3) traces of 10 to 30 samples; each gesture class has its own frequency."""

    def __init__(self, n, n_classes=4, seed=0):
        g = torch.Generator().manual_seed(seed)
        self.items = []
        for _ in range(n):
            label = int(torch.randint(0, n_classes, (1,), generator=g))
            length = int(torch.randint(10, 31, (1,), generator=g))
            t = torch.linspace(0, 1, length).unsqueeze(1)
            trace = torch.sin(6.28 * (label + 1) * t + torch.rand(1, 3, generator=g))
            self.items.append((trace + 0.1 * torch.randn(length, 3, generator=g), label))

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        return self.items[i]


def collate(batch):
    traces, labels = zip(*batch)
    lengths = torch.tensor([len(t) for t in traces])
    return pad_sequence(traces, batch_first=True), lengths, torch.tensor(labels)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--lr", type=float, default=5e-3)
    args = parser.parse_args()

    torch.manual_seed(0)
    train_loader = DataLoader(GestureTraces(120), batch_size=args.batch_size, shuffle=True,
                              collate_fn=collate)
    test_loader = DataLoader(GestureTraces(40, seed=1), batch_size=40, collate_fn=collate)
    model = GestureGRU(in_features=3, hidden=32, n_classes=4)
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    for epoch in range(args.epochs):
        model.train()
        for padded, lengths, labels in train_loader:
            logits = model(x=padded, lengths=lengths)
            loss = criterion(logits, labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        model.eval()
        with torch.no_grad():
            padded, lengths, labels = next(iter(test_loader))
            acc = (model(x=padded, lengths=lengths).argmax(-1) == labels).float().mean()
        print(f"epoch {epoch}: loss {loss.item():.4f} test acc {acc.item():.2%}")


if __name__ == "__main__":
    main()
