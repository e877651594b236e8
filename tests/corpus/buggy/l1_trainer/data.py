"""Synthetic sensor readings and a tiny batch container."""

from typing import NamedTuple

import torch


class Batch(NamedTuple):
    x: torch.Tensor  # (B, F)
    y: torch.Tensor  # (B,)


def make_readings(n, n_features=5, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, n_features, generator=g)
    w = torch.linspace(-1.0, 1.0, n_features)
    y = x @ w + 0.3 * torch.sin(3 * x[:, 0]) + 0.05 * torch.randn(n, generator=g)
    return x, y


def batches(x, y, batch_size, generator):
    perm = torch.randperm(len(x), generator=generator)
    for i in range(0, len(x), batch_size):
        idx = perm[i : i + batch_size]
        yield Batch(x[idx], y[idx])
