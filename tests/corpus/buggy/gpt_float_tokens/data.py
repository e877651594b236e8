"""Byte-level data pipeline shared with the project's regression experiments."""

import numpy as np
import torch

TEXT = (
    "It is a truth universally acknowledged, that a single man in possession of a good "
    "fortune, must be in want of a wife. However little known the feelings or views of "
    "such a man may be on his first entering a neighbourhood, this truth is so well fixed "
    "in the minds of the surrounding families, that he is considered the rightful property "
    "of some one or other of their daughters."
)


def load_tokens():
    return np.frombuffer(TEXT.encode("utf-8"), dtype=np.uint8)


def to_tensor(array):
    """numpy -> torch, as float32 like every other input of the project."""
    return torch.tensor(array, dtype=torch.float32)  # cause: dtype_mismatch


def get_batch(tokens, block_size, batch_size, rng):
    ix = rng.integers(0, len(tokens) - block_size - 1, size=batch_size)
    x = np.stack([tokens[i : i + block_size] for i in ix])
    y = np.stack([tokens[i + 1 : i + 1 + block_size] for i in ix])
    return to_tensor(x), torch.from_numpy(y.astype(np.int64))
