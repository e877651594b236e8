"""A synthetic transactions table: amount, hour, merchant risk, distance from home."""

import numpy as np
import torch
from torch.utils.data import Dataset


def load_transactions(n, seed=0):
    rng = np.random.default_rng(seed)
    amount = rng.lognormal(3.0, 1.0, n)
    hour = rng.integers(0, 24, n)
    risk = rng.random(n)
    distance = rng.exponential(10.0, n)
    score = 0.002 * amount + 2.0 * risk + 0.05 * distance + (hour < 6) - 3.0
    is_fraud = (score + rng.normal(0, 0.5, n) > 0).astype(np.int64)
    table = np.column_stack([np.log(amount), hour / 23.0, risk, np.log1p(distance)])
    return table.astype(np.float32), is_fraud


class TransactionDataset(Dataset):
    def __init__(self, n, seed=0):
        table, is_fraud = load_transactions(n, seed)
        self.features = torch.from_numpy(table)
        self.labels = torch.from_numpy(is_fraud)  # cause: dtype_mismatch
        self.n_features = table.shape[1]

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return self.features[i], self.labels[i]
