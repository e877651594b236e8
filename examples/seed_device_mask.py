"""The seed story's example 1, reproduced without a GPU.

`y` is made on the CPU by `torch.zeros(6)` while `mask` and `source` live on another
device ('meta' stands in for 'cuda' here), and `mask` is int64 instead of bool.
`shapelens run examples/seed_device_mask.py` names both culprits at their birth lines.
"""

import torch

DEVICE = "meta"  # use "cuda" on a machine with a GPU


def myfunc(mask, x):
    y = torch.zeros(6)
    y.masked_scatter_(mask, x)
    return y


mask = torch.tensor([0, 1, 0, 1, 1, 0], device=DEVICE)
source = torch.tensor([1.0, 2.0, 3.0], device=DEVICE)
y = myfunc(mask, source)
