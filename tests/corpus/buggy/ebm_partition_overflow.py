"""Energy-based model of 2-D points on a ring, trained by contrastive divergence against uniform noise (the UvA deep-learning tutorial's EBM loss), with a log-likelihood estimate on a grid every few steps; bug: the regulariser alpha * (e_real ** 2 + e_fake ** 2) that keeps the energies bounded is left out, so the energies drift apart while the contrastive loss keeps falling, and the partition estimate written as torch.exp(-energy) (not torch.logsumexp) overflows to inf at the 70th estimate (step 690)."""

import argparse
import math
from dataclasses import dataclass

import torch
import torch.nn as nn


@dataclass
class Config:
    steps: int = 800
    batch_size: int = 64
    hidden: int = 32
    lr: float = 1e-3
    eval_every: int = 10
    grid_points: int = 21
    box: float = 3.0


def sample_ring(n, radius=2.0, noise=0.1):
    theta = torch.rand(n) * 2 * math.pi
    points = torch.stack([radius * torch.cos(theta), radius * torch.sin(theta)], dim=1)
    return points + noise * torch.randn(n, 2)


class EnergyNet(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(2, hidden), nn.SiLU(),
            nn.Linear(hidden, hidden), nn.SiLU(),
            nn.Linear(hidden, 1),
        )

    def forward(self, x):
        return self.net(x).squeeze(-1)


@torch.no_grad()
def log_likelihood(model, data, grid, cell_area):
    unnormalized = torch.exp(-model(grid))  # expect: nonfinite
    log_z = torch.log(unnormalized.sum() * cell_area)
    return (-model(data) - log_z).mean()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=Config.steps)
    parser.add_argument("--lr", type=float, default=Config.lr)
    args = parser.parse_args()
    cfg = Config(steps=args.steps, lr=args.lr)

    torch.manual_seed(0)
    model = EnergyNet(cfg.hidden)
    optimizer = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    axis = torch.linspace(-cfg.box, cfg.box, cfg.grid_points)
    grid = torch.stack(torch.meshgrid(axis, axis, indexing="ij"), dim=-1).reshape(-1, 2)
    cell_area = (axis[1] - axis[0]) ** 2
    val_data = sample_ring(256)

    for step in range(cfg.steps):
        real = sample_ring(cfg.batch_size)
        fake = (torch.rand(cfg.batch_size, 2) * 2 - 1) * cfg.box
        e_real, e_fake = model(real), model(fake)
        cdiv_loss = e_real.mean() - e_fake.mean()
        loss = cdiv_loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % cfg.eval_every == 0:
            ll = log_likelihood(model, val_data, grid, cell_area)
            if step % 100 == 0:
                print(f"step {step}: contrastive loss {cdiv_loss.item():.3f} val log-likelihood {ll.item():.3f}")


if __name__ == "__main__":
    main()
