"""Benchmark workload: 20,000 iterations of small numpy ops (runs on Python 3.12+ too, where
ShapeLens uses sys.monitoring)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from harness import measure, scaled

ITERATIONS = scaled(20_000)


def train(a: np.ndarray, b: np.ndarray) -> float:
    total = np.zeros(())
    for _ in range(ITERATIONS):
        a = a * 0.5 + b
        c = a.sum()
        total = total + c
    return float(total)


if __name__ == "__main__":
    measure("numpy_loop", train, np.ones(8), np.full(8, 0.1))
