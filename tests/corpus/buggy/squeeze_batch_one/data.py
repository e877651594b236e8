"""Synthetic lesion crops and patient metadata (age, sex, site one-hot)."""

import torch
from torch.utils.data import DataLoader, Dataset


class LesionDataset(Dataset):
    def __init__(self, n, size=16, seed=0):
        g = torch.Generator().manual_seed(seed)
        self.labels = torch.randint(0, 3, (n,), generator=g)
        self.images = torch.rand(n, 3, size, size, generator=g) + 0.2 * self.labels.view(-1, 1, 1, 1)
        self.meta = torch.randn(n, 6, generator=g)

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return self.images[i], self.meta[i], self.labels[i]


def make_loader(n, batch_size):
    return DataLoader(LesionDataset(n), batch_size=batch_size, shuffle=True, drop_last=False)
