"""Benchmark workload: a 3-layer MLP (hidden 64, ReLU), 400 SGD steps on a (32,32) batch."""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from harness import measure, scaled
from models import mlp

STEPS = scaled(400)


def train(
    model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, optimizer: torch.optim.SGD
) -> float:
    loss_fn = torch.nn.MSELoss()
    loss = torch.zeros(())
    for _ in range(STEPS):
        optimizer.zero_grad()
        pred = model(x)
        loss = loss_fn(pred, y)
        loss.backward()
        optimizer.step()
    return loss.item()


if __name__ == "__main__":
    torch.manual_seed(0)
    model, x, y = mlp(torch)
    measure("mlp", train, model, x, y, torch.optim.SGD(model.parameters(), lr=0.01))
