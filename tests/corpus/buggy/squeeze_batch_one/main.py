"""Skin-lesion classifier on an image plus patient metadata (main.py + model.py + data.py); bug in model.py: .squeeze() of the pooled (B, 32, 1, 1) features also drops the batch dim of the last batch of one (65 samples, batch_size=16, drop_last=False), and torch.cat with the (1, 16) metadata features fails."""

import argparse

import torch
import torch.nn.functional as F
from data import make_loader
from model import ImageMetaNet

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=2)
parser.add_argument("--batch-size", type=int, default=16)
parser.add_argument("--lr", type=float, default=1e-3)
args = parser.parse_args()

torch.manual_seed(0)
loader = make_loader(n=65, batch_size=args.batch_size)
model = ImageMetaNet(n_meta=6, n_classes=3)
optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)

for epoch in range(args.epochs):
    model.train()
    total, seen = 0.0, 0
    for images, meta, labels in loader:
        logits = model(images, meta)
        loss = F.cross_entropy(logits, labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total += loss.item() * len(labels)
        seen += len(labels)
    print(f"epoch {epoch}: loss {total / seen:.4f}")
