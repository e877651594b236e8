"""Frame-level voice activity detection on synthetic log-energy features (main.py + model.py + data.py, a config dataclass); bug in model.py: forward() folds the per-frame outputs back with h.reshape(self.batch_size, T, self.hidden), right for the full batches of 16, but the last batch of the epoch holds 4 clips (100 clips, drop_last=False), and reshape fails on its 4 * 50 * 32 values."""

import argparse
from dataclasses import dataclass

import torch
import torch.nn as nn
from data import make_loaders
from model import FrameTagger


@dataclass
class Config:
    n_clips: int = 100
    n_frames: int = 50
    n_features: int = 20
    hidden: int = 32
    batch_size: int = 16
    epochs: int = 2
    lr: float = 3e-3
    seed: int = 0


def run_epoch(model, loader, criterion, optimizer=None):
    training = optimizer is not None
    model.train(training)
    total, frames, correct = 0.0, 0, 0
    for feats, labels in loader:
        with torch.set_grad_enabled(training):
            logits = model(feats)
            loss = criterion(logits, labels)
        if training:
            optimizer.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
        total += loss.item() * labels.numel()
        frames += labels.numel()
        correct += ((logits > 0).float() == labels).sum().item()
    return total / frames, correct / frames


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=Config.epochs)
    parser.add_argument("--batch-size", type=int, default=Config.batch_size)
    args = parser.parse_args()
    cfg = Config(epochs=args.epochs, batch_size=args.batch_size)

    torch.manual_seed(cfg.seed)
    train_loader, val_loader = make_loaders(cfg)
    model = FrameTagger(cfg)
    criterion = nn.BCEWithLogitsLoss()
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.lr)
    for epoch in range(cfg.epochs):
        train_loss, train_acc = run_epoch(model, train_loader, criterion, optimizer)
        val_loss, val_acc = run_epoch(model, val_loader, criterion)
        print(f"epoch {epoch}: train {train_loss:.4f} ({train_acc:.2%}) val {val_loss:.4f} ({val_acc:.2%})")


if __name__ == "__main__":
    main()
