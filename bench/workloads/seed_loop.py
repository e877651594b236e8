"""Benchmark workload: the seed's example-2 training loop (its (4,4) broadcast), 1,000 steps."""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from harness import measure, scaled

STEPS = scaled(1000)


def train(
    model: torch.nn.Linear, x: torch.Tensor, y: torch.Tensor, optimizer: torch.optim.SGD
) -> float:
    loss = torch.zeros(())
    for _ in range(STEPS):
        optimizer.zero_grad()
        pred = model(x)
        squared_diff = (y - pred) ** 2  # (4,) - (4, 1) broadcasts to (4, 4): the seed bug
        loss = squared_diff.mean()
        loss.backward()
        optimizer.step()
    return loss.item()


if __name__ == "__main__":
    torch.manual_seed(0)
    model = torch.nn.Linear(2, 1)
    x = torch.tensor([[0.0, 0.0], [0.0, 1.0], [1.0, 0.0], [1.0, 1.0]])
    y = torch.tensor([3.0, 5.0, 4.0, 6.0])
    measure("seed_loop", train, model, x, y, torch.optim.SGD(model.parameters(), lr=0.1))
