"""Classifier on a numpy table; bug: labels sliced as table[:, -1:] are (N, 1), and F.cross_entropy rejects the multi-target (B, 1) target."""

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

rng = np.random.default_rng(0)
torch.manual_seed(0)

# a "CSV" of 4 measurements followed by the species id
n_per_class = 60
centres = np.array([[1.0, 0.0, 2.0, 0.5], [0.0, 2.0, 1.0, 1.5], [2.0, 2.0, 0.0, 2.5]])
rows = []
for species, centre in enumerate(centres):
    samples = centre + 0.4 * rng.standard_normal((n_per_class, 4))
    rows.append(np.column_stack([samples, np.full(n_per_class, species)]))
table = np.concatenate(rows)
rng.shuffle(table)

features = torch.tensor(table[:, :-1], dtype=torch.float32)
labels = torch.tensor(table[:, -1:], dtype=torch.long)  # cause: shape_mismatch

loader = DataLoader(TensorDataset(features, labels), batch_size=32, shuffle=True)
model = nn.Sequential(nn.Linear(4, 32), nn.ReLU(), nn.Linear(32, 3))
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)

for epoch in range(5):
    for xb, yb in loader:
        logits = model(xb)
        loss = F.cross_entropy(logits, yb)  # expect: shape_mismatch
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"epoch {epoch}: loss {loss.item():.4f}")
