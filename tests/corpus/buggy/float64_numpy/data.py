"""Wine-quality-like tabular data generated with numpy and wrapped in a DataLoader."""

import numpy as np
import torch
from torch.utils.data import DataLoader, TensorDataset


def load_wine(n=300, seed=0):
    rng = np.random.default_rng(seed)
    acidity = rng.normal(7.0, 1.2, n)
    sugar = rng.gamma(2.0, 2.5, n)
    alcohol = rng.normal(10.5, 1.0, n)
    sulphates = rng.normal(0.65, 0.15, n)
    X = np.column_stack([acidity, sugar, alcohol, sulphates])
    quality = 0.3 * alcohol + 2.0 * sulphates - 0.1 * acidity + rng.normal(0, 0.3, n)
    return X, quality


def make_loaders(batch_size=32, seed=0):
    X, y = load_wine(seed=seed)
    X = (X - X.mean(axis=0)) / X.std(axis=0)
    y = (y - y.mean()) / y.std()
    X_t = torch.from_numpy(X)  # cause: dtype_mismatch
    y_t = torch.from_numpy(y).unsqueeze(1)
    split = int(0.8 * len(X_t))
    train = TensorDataset(X_t[:split], y_t[:split])
    valid = TensorDataset(X_t[split:], y_t[split:])
    return (DataLoader(train, batch_size=batch_size, shuffle=True, num_workers=0),
            DataLoader(valid, batch_size=batch_size))
