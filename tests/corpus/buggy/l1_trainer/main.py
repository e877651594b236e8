"""Sensor regression with a Trainer class (main.py + trainer.py + data.py); bug in trainer.py: out (B, 1) - batch.y (B,) is (B, B) in the L1 loss."""

import argparse

import torch
import torch.nn as nn
from data import batches, make_readings
from trainer import Trainer

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=8)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--lr", type=float, default=1e-2)
args = parser.parse_args()

torch.manual_seed(0)
x_train, y_train = make_readings(256, seed=0)
x_val, y_val = make_readings(64, seed=1)

model = nn.Sequential(nn.Linear(5, 32), nn.Tanh(), nn.Linear(32, 1))
trainer = Trainer(model, lr=args.lr)
generator = torch.Generator().manual_seed(0)
for epoch in range(args.epochs):
    for batch in batches(x_train, y_train, args.batch_size, generator):
        trainer.train_step(batch)
    if epoch % 2 == 0:
        print(f"epoch {epoch}: train L1 {trainer.history[-1]:.4f} "
              f"val L1 {trainer.evaluate(x_val, y_val):.4f}")
print(f"baseline (predict the mean): {(y_val - y_train.mean()).abs().mean().item():.4f}")
