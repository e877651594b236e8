"""Character-level data for the nanoGPT example: a tiny synthetic corpus kept in memory."""

import numpy as np
import torch

LINES = [
    "First Citizen: Before we proceed any further, hear me speak.",
    "All: Speak, speak.",
    "First Citizen: You are all resolved rather to die than to famish?",
    "All: Resolved. resolved.",
    "First Citizen: First, you know Caius Marcius is chief enemy to the people.",
    "All: We know't, we know't.",
]


def prepare(repeats=20):
    text = "\n".join(LINES * repeats)
    chars = sorted(set(text))
    stoi = {ch: i for i, ch in enumerate(chars)}
    itos = {i: ch for i, ch in enumerate(chars)}
    ids = np.array([stoi[c] for c in text], dtype=np.uint16)
    n = int(0.9 * len(ids))
    meta = {"vocab_size": len(chars), "stoi": stoi, "itos": itos}
    return ids[:n], ids[n:], meta


def get_batch(data, block_size, batch_size, device):
    ix = torch.randint(len(data) - block_size, (batch_size,))
    x = torch.stack([torch.from_numpy((data[i : i + block_size]).astype(np.int64)) for i in ix])
    y = torch.stack(
        [torch.from_numpy((data[i + 1 : i + 1 + block_size]).astype(np.int64)) for i in ix]
    )
    return x.to(device), y.to(device)
