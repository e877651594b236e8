"""Character data: a synthetic corpus, its vocabulary, and a Dataset of (x, y) windows."""

import torch
from torch.utils.data import Dataset

TEXT = (
    "the quick brown fox jumps over the lazy dog. "
    "pack my box with five dozen liquor jugs! "
    "how vexingly quick daft zebras jump; "
) * 12


class CharDataset(Dataset):
    def __init__(self, text, block_size):
        chars = sorted(set(text))
        self.stoi = {ch: i for i, ch in enumerate(chars)}
        self.vocab_size = len(chars)
        self.block_size = block_size
        self.data = torch.tensor([self.stoi[c] for c in text], dtype=torch.long)  # (N,)

    def __len__(self):
        return len(self.data) - self.block_size

    def __getitem__(self, i):
        chunk = self.data[i : i + self.block_size + 1]  # (block_size + 1,)
        return chunk[:-1], chunk[1:]
