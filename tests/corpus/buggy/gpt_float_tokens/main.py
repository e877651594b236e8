"""Byte-level GPT (main.py + model.py + data.py); bug: data.py's to_tensor() makes the token ids float32 and nn.Embedding in model.py rejects them."""

import argparse

import numpy as np
import torch
from data import get_batch, load_tokens
from model import GPT

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=20)
parser.add_argument("--batch-size", type=int, default=8)
parser.add_argument("--block-size", type=int, default=32)
parser.add_argument("--lr", type=float, default=3e-3)
args = parser.parse_args()

torch.manual_seed(0)
rng = np.random.default_rng(0)
tokens = load_tokens()
model = GPT(block_size=args.block_size)
optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.1)

for step in range(args.steps):
    xb, yb = get_batch(tokens, args.block_size, args.batch_size, rng)
    _, loss = model(xb, yb)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    if step % 5 == 0:
        print(f"step {step}: loss {loss.item():.4f}")
