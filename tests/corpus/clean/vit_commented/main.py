"""A tiny Vision Transformer (timm's layout, main.py + model.py) trained on synthetic 16x16 images with a config dataclass, AdamW, a cosine schedule, label smoothing and an eval loop; model.py carries shape comments in the published forms (`# x: [B, C, H, W]` on the def line, `# Shape: (B, N, D)`, `# -> (B, N + 1, D)`, `# shape = [B, heads, N, N]`, one alone above its line) and prose in parentheses, and the last batch is smaller (100 images, batch_size=16) (clean)."""

import argparse
from dataclasses import dataclass

import torch
import torch.nn as nn
from model import VisionTransformer
from torch.utils.data import DataLoader, Dataset


@dataclass
class Config:
    img_size: int = 16
    patch_size: int = 4
    num_classes: int = 4
    embed_dim: int = 32
    depth: int = 2
    num_heads: int = 4
    batch_size: int = 16
    epochs: int = 3
    lr: float = 1e-3
    weight_decay: float = 0.05
    label_smoothing: float = 0.1


class Stripes(Dataset):
    """Images whose class is the orientation of their stripes (horizontal, vertical, two diagonals)."""

    def __init__(self, n, size, seed):
        g = torch.Generator().manual_seed(seed)
        self.labels = torch.randint(0, 4, (n,), generator=g)
        r = torch.arange(size).view(-1, 1).float()
        c = torch.arange(size).view(1, -1).float()
        patterns = torch.stack([torch.sin(r + 0 * c), torch.sin(c + 0 * r), torch.sin(r + c), torch.sin(r - c)])
        self.images = patterns[self.labels].unsqueeze(1).repeat(1, 3, 1, 1)
        self.images += 0.3 * torch.randn(self.images.shape, generator=g)

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return self.images[i], self.labels[i]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=Config.epochs)
    args = parser.parse_args()
    cfg = Config(epochs=args.epochs)

    torch.manual_seed(0)
    train_loader = DataLoader(Stripes(100, cfg.img_size, seed=0), batch_size=cfg.batch_size, shuffle=True,
                              drop_last=False)
    val_loader = DataLoader(Stripes(40, cfg.img_size, seed=1), batch_size=cfg.batch_size)
    model = VisionTransformer(cfg.img_size, cfg.patch_size, 3, cfg.num_classes, cfg.embed_dim, cfg.depth,
                              cfg.num_heads)
    criterion = nn.CrossEntropyLoss(label_smoothing=cfg.label_smoothing)
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=cfg.epochs * len(train_loader))
    for epoch in range(cfg.epochs):
        model.train()
        for images, labels in train_loader:
            loss = criterion(model(images), labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            scheduler.step()
        model.eval()
        correct = 0
        with torch.no_grad():
            for images, labels in val_loader:
                correct += (model(images).argmax(dim=-1) == labels).sum().item()
        print(f"epoch {epoch}: loss {loss.item():.4f} val acc {correct / len(val_loader.dataset):.2%}")


if __name__ == "__main__":
    main()
