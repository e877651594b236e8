"""Benchmark workload: 20,000 iterations of a few small tensor ops (per-line tracer cost)."""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from harness import measure, scaled

ITERATIONS = scaled(20_000)


def train(a: torch.Tensor, b: torch.Tensor) -> float:
    total = torch.zeros(())
    for _ in range(ITERATIONS):
        a = a * 0.5 + b
        c = a.sum()
        total = total + c
    return total.item()


if __name__ == "__main__":
    measure("tight_loop", train, torch.ones(8), torch.full((8,), 0.1))
