"""Train the GPT on CUDA: the shape-only run (`shapelens run --fake`) of 1.2B parameters or more."""

import argparse

import numpy as np
import torch
from model import GPT
from torch.utils.data import DataLoader, TensorDataset

parser = argparse.ArgumentParser()
parser.add_argument("--width", type=int, default=2048)
parser.add_argument("--depth", type=int, default=20)
parser.add_argument("--heads", type=int, default=16)
parser.add_argument("--dtype", default="float32")
parser.add_argument("--probe", default="probe.pt")
parser.add_argument("--steps", type=int, default=None, help="stop after this many steps")
args = parser.parse_args()

device = "cuda" if torch.cuda.is_available() else "cpu"
torch.manual_seed(0)
tokens = torch.from_numpy(np.random.randint(0, 50257, size=(32, 129)).astype(np.int64))
loader = DataLoader(TensorDataset(tokens[:, :-1], tokens[:, 1:]), batch_size=8, shuffle=True)
model = GPT(vocab=50257, width=args.width, depth=args.depth, heads=args.heads, context=128)
model = model.to(device, dtype=getattr(torch, args.dtype))
params = sum(p.numel() for p in model.parameters())
probe = torch.nn.Linear(2048, 10).cuda()
probe.load_state_dict(torch.load(args.probe, map_location=device))
optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
for step, (x, y) in enumerate(loader):
    x, y = x.to(device), y.to(device)
    logits, loss = model(x, y)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
    torch.save(model.state_dict(), "checkpoint.pt")
    print(f"step {step} loss {loss.item():.3f}")
    if args.steps is not None and step + 1 >= args.steps:
        break
