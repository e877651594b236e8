"""Frame-level voice activity detection plus a clip-level "contains speech" head (main.py + model.py + data.py, a config dataclass): the model folds frames back with h.reshape(B, T, self.hidden) where B, T come from the batch itself, and flattens the pooled conv features with x.view(x.size(0), -1); the training set's last batch holds 4 clips (100 clips, batch_size=16, drop_last=False) and the validation set's last batch 1 clip (33 clips) (clean)."""

import argparse
from dataclasses import dataclass

import torch
import torch.nn as nn
from data import make_loaders
from model import SpeechDetector


@dataclass
class Config:
    n_clips: int = 100
    n_val_clips: int = 33
    n_frames: int = 48
    n_features: int = 20
    hidden: int = 32
    batch_size: int = 16
    epochs: int = 2
    lr: float = 3e-3
    seed: int = 0


def run_epoch(model, loader, optimizer=None):
    training = optimizer is not None
    model.train(training)
    frame_loss_fn = nn.BCEWithLogitsLoss()
    clip_loss_fn = nn.BCEWithLogitsLoss()
    total, n = 0.0, 0
    for feats, frame_labels in loader:
        clip_labels = frame_labels.amax(dim=1, keepdim=True)  # (B, 1): any speech in the clip
        with torch.set_grad_enabled(training):
            frame_logits, clip_logits = model(feats)
            loss = frame_loss_fn(frame_logits, frame_labels) + clip_loss_fn(clip_logits, clip_labels)
        if training:
            optimizer.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
        total += loss.item() * feats.size(0)
        n += feats.size(0)
    return total / n


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=Config.epochs)
    parser.add_argument("--batch-size", type=int, default=Config.batch_size)
    args = parser.parse_args()
    cfg = Config(epochs=args.epochs, batch_size=args.batch_size)

    torch.manual_seed(cfg.seed)
    train_loader, val_loader = make_loaders(cfg)
    model = SpeechDetector(cfg)
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.lr)
    for epoch in range(cfg.epochs):
        train_loss = run_epoch(model, train_loader, optimizer)
        val_loss = run_epoch(model, val_loader)
        print(f"epoch {epoch}: train {train_loss:.4f} val {val_loss:.4f}")


if __name__ == "__main__":
    main()
