"""Fraud detection on a transactions table (main.py + data.py); bug in data.py: the is_fraud column becomes an int64 tensor, and nn.BCEWithLogitsLoss needs float targets ("result type Float can't be cast to the desired output type Long")."""

import argparse

import torch
import torch.nn as nn
from data import TransactionDataset
from torch.utils.data import DataLoader, random_split

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=3)
parser.add_argument("--batch-size", type=int, default=64)
parser.add_argument("--pos-weight", type=float, default=5.0)
args = parser.parse_args()

torch.manual_seed(0)
dataset = TransactionDataset(n=512)
train_set, val_set = random_split(dataset, [448, 64], generator=torch.Generator().manual_seed(0))
train_loader = DataLoader(train_set, batch_size=args.batch_size, shuffle=True)
val_loader = DataLoader(val_set, batch_size=args.batch_size)

model = nn.Sequential(nn.Linear(dataset.n_features, 32), nn.ReLU(), nn.Linear(32, 1))
criterion = nn.BCEWithLogitsLoss(pos_weight=torch.tensor([args.pos_weight]))
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)

for epoch in range(args.epochs):
    model.train()
    for features, is_fraud in train_loader:
        logits = model(features)
        loss = criterion(logits, is_fraud.unsqueeze(1))  # expect: dtype_mismatch
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.eval()
    with torch.no_grad():
        hits = sum(((model(f) > 0).squeeze(1) == (y > 0)).sum().item() for f, y in val_loader)
    print(f"epoch {epoch}: loss {loss.item():.4f}, val acc {hits / len(val_set):.2f}")
