"""MLP on spirals: config dataclass + argparse, DataLoader, BatchNorm/LayerNorm, label smoothing, OneCycleLR, clipping, input() only on a tty (clean)."""

import argparse
import math
import sys
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset


@dataclass
class Config:
    n_classes: int = 3
    points_per_class: int = 100
    hidden: int = 64
    dropout: float = 0.1
    epochs: int = 8
    batch_size: int = 32
    lr: float = 1e-2
    weight_decay: float = 1e-4
    grad_clip: float = 1.0
    label_smoothing: float = 0.05
    seed: int = 0


def parse_config() -> Config:
    defaults = Config()
    parser = argparse.ArgumentParser(description=__doc__)
    for name, value in vars(defaults).items():
        parser.add_argument(f"--{name.replace('_', '-')}", type=type(value), default=value)
    return Config(**vars(parser.parse_args()))


def make_spirals(cfg: Config, generator: torch.Generator):
    xs, ys = [], []
    for c in range(cfg.n_classes):
        r = torch.linspace(0.05, 1.0, cfg.points_per_class)
        theta = (
            torch.linspace(c * 4.0, (c + 1) * 4.0, cfg.points_per_class)
            + 0.2 * torch.randn(cfg.points_per_class, generator=generator)
        )
        xs.append(torch.stack([r * torch.sin(theta), r * torch.cos(theta)], dim=1))
        ys.append(torch.full((cfg.points_per_class,), c, dtype=torch.long))
    return torch.cat(xs), torch.cat(ys)


class MLP(nn.Module):
    def __init__(self, cfg: Config):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(2, cfg.hidden),
            nn.BatchNorm1d(cfg.hidden),
            nn.ReLU(),
            nn.Dropout(cfg.dropout),
            nn.Linear(cfg.hidden, cfg.hidden),
            nn.LayerNorm(cfg.hidden),
            nn.GELU(),
            nn.Linear(cfg.hidden, cfg.n_classes),
        )

    def forward(self, x):
        return self.net(x)


@torch.no_grad()
def evaluate(model, loader):
    model.eval()
    correct, total, loss_sum = 0, 0, 0.0
    for xb, yb in loader:
        logits = model(xb)
        loss_sum += F.cross_entropy(logits, yb, reduction="sum").item()
        correct += (logits.argmax(dim=1) == yb).sum().item()
        total += yb.numel()
    model.train()
    return loss_sum / total, correct / total


def main():
    cfg = parse_config()
    torch.manual_seed(cfg.seed)
    generator = torch.Generator().manual_seed(cfg.seed)
    x, y = make_spirals(cfg, generator)
    dataset = TensorDataset(x, y)
    n_val = len(dataset) // 5
    train_set, val_set = torch.utils.data.random_split(
        dataset, [len(dataset) - n_val, n_val], generator=generator
    )
    train_loader = DataLoader(train_set, batch_size=cfg.batch_size, shuffle=True,
                              num_workers=0, drop_last=True)
    val_loader = DataLoader(val_set, batch_size=64)

    model = MLP(cfg)
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    scheduler = torch.optim.lr_scheduler.OneCycleLR(
        optimizer, max_lr=cfg.lr, total_steps=cfg.epochs * len(train_loader)
    )
    for epoch in range(cfg.epochs):
        running = 0.0
        for xb, yb in train_loader:
            logits = model(xb)
            loss = F.cross_entropy(logits, yb, label_smoothing=cfg.label_smoothing)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
            optimizer.step()
            scheduler.step()
            running += loss.item()
        val_loss, val_acc = evaluate(model, val_loader)
        assert math.isfinite(grad_norm.item())
        print(f"epoch {epoch}: train {running / len(train_loader):.4f} "
              f"val {val_loss:.4f} acc {val_acc:.3f}")

    if sys.stdin.isatty():
        answer = input("save the model? [y/N] ")
        if answer.strip().lower() == "y":
            torch.save(model.state_dict(), "mlp.pt")


if __name__ == "__main__":
    main()
