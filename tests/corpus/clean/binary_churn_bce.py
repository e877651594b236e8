"""Customer-churn classifier with one output logit (clean): (B, 1) logits into BCEWithLogitsLoss against (B, 1) float targets, keepdim standardisation, a last batch of one (65 rows, batch_size=16, drop_last=False) squeezed with an explicit dim, a (B, 1) column summed over dim=1 to drop it, sigmoid probabilities and a per-customer prediction on batches of one."""

import argparse

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def churn_table(n, seed=0):
    g = torch.Generator().manual_seed(seed)
    tenure = torch.randint(1, 72, (n, 1), generator=g).float()
    monthly = 20 + 80 * torch.rand(n, 1, generator=g)
    tickets = torch.poisson(torch.full((n, 1), 1.5), generator=g)
    x = torch.cat([tenure, monthly, tickets], dim=1)
    logit = -0.05 * tenure + 0.03 * monthly + 0.6 * tickets - 1.5
    y = (torch.rand(n, 1, generator=g) < torch.sigmoid(logit)).float()
    return x, y


parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=4)
parser.add_argument("--batch-size", type=int, default=16)
args = parser.parse_args()

torch.manual_seed(0)
x, y = churn_table(65)
mean, std = x.mean(dim=0, keepdim=True), x.std(dim=0, keepdim=True)
x = (x - mean) / std
loader = DataLoader(TensorDataset(x, y), batch_size=args.batch_size, shuffle=True, drop_last=False)

model = nn.Sequential(nn.Linear(3, 16), nn.ReLU(), nn.Linear(16, 1))
criterion = nn.BCEWithLogitsLoss()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
for epoch in range(args.epochs):
    total, correct = 0.0, 0
    for xb, yb in loader:
        logits = model(xb)
        loss = criterion(logits, yb)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total += loss.item() * len(xb)
        probs = torch.sigmoid(logits).squeeze(1)
        correct += ((probs > 0.5).float() == yb.squeeze(1)).sum().item()
    print(f"epoch {epoch}: loss {total / len(x):.4f}, acc {correct / len(x):.2f}")

with torch.no_grad():
    margins = (model(x) * (2 * y - 1)).sum(dim=1)
    print(f"mean signed margin {margins.mean().item():.3f}")
    for i in range(3):
        p = torch.sigmoid(model(x[i : i + 1])).squeeze(1)
        print(f"customer {i}: churn probability {p.item():.2f}")
