"""Four synthetic sensors with a daily cycle; the target is sensor 0 one step ahead."""

import math

import torch
from torch.utils.data import DataLoader, TensorDataset


def make_series(n_steps, generator):
    t = torch.arange(n_steps, dtype=torch.float32)
    daily = torch.sin(2 * math.pi * t / 24).unsqueeze(1)
    phases = torch.tensor([0.0, 0.5, 1.0, 1.5])
    series = torch.sin(2 * math.pi * t.unsqueeze(1) / 24 + phases) + 0.3 * daily
    return series + 0.05 * torch.randn(n_steps, 4, generator=generator)


def windows_of(series, window):
    xs = series.unfold(0, window, 1)[:-1].transpose(1, 2)  # (N, window, 4)
    ys = series[window:, :1]  # (N, 1)
    return xs, ys


def make_loaders(window, batch_size):
    g = torch.Generator().manual_seed(0)
    xs, ys = windows_of(make_series(100 + window, g), window)
    vx, vy = windows_of(make_series(40 + window, g), window)
    train = DataLoader(TensorDataset(xs, ys), batch_size=batch_size, shuffle=True, drop_last=False)
    val = DataLoader(TensorDataset(vx, vy), batch_size=batch_size)
    return train, val
