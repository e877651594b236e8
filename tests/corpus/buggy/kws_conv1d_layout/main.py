"""Keyword spotting on synthetic 1-second clips (main.py + model.py + features.py): log-magnitude STFT frames computed on each batch, a Conv1d network over time, Adam and a validation pass; bug in features.py: the frames are cut with waves.unfold(-1, n_fft, hop), which puts time before frequency, (B, T, F) = (16, 30, 33), and the first Conv1d, built for 33 frequency channels, gets 30 channels."""

import argparse

import torch
import torch.nn as nn
from features import log_spectrogram
from model import KeywordNet
from torch.utils.data import DataLoader, Dataset

KEYWORDS = ["yes", "no", "up", "down"]


class SyntheticSpeechCommands(Dataset):
    """One-second clips at 1 kHz: each keyword is a chirp starting at its own pitch."""

    def __init__(self, n, sample_rate=1000, seed=0):
        g = torch.Generator().manual_seed(seed)
        self.labels = torch.randint(0, len(KEYWORDS), (n,), generator=g)
        t = torch.arange(sample_rate) / sample_rate
        base = 60.0 + 80.0 * self.labels.float().unsqueeze(1)
        self.waves = torch.sin(2 * torch.pi * (base * t + 40.0 * t**2)) + 0.3 * torch.randn(n, sample_rate, generator=g)

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return self.waves[i], self.labels[i]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--n-fft", type=int, default=64)
    parser.add_argument("--hop", type=int, default=32)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--lr", type=float, default=1e-3)
    args = parser.parse_args()

    torch.manual_seed(0)
    train_loader = DataLoader(SyntheticSpeechCommands(96), batch_size=args.batch_size, shuffle=True)
    val_loader = DataLoader(SyntheticSpeechCommands(32, seed=1), batch_size=args.batch_size)
    model = KeywordNet(n_freq=args.n_fft // 2 + 1, n_classes=len(KEYWORDS))
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    for epoch in range(args.epochs):
        model.train()
        for waves, labels in train_loader:
            spec = log_spectrogram(waves, args.n_fft, args.hop)
            loss = criterion(model(spec), labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        model.eval()
        correct = 0
        with torch.no_grad():
            for waves, labels in val_loader:
                correct += (model(log_spectrogram(waves, args.n_fft, args.hop)).argmax(1) == labels).sum().item()
        print(f"epoch {epoch}: loss {loss.item():.4f} val acc {correct / len(val_loader.dataset):.2%}")


if __name__ == "__main__":
    main()
