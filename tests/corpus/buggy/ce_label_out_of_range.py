"""Wine cultivar classifier on a UCI-style table whose first column is the class, numbered 1 to 3; bug: the labels are taken as they are, so class 3 is out of bounds for the 3 logits of F.cross_entropy (classes 0 to 2): "Target 3 is out of bounds"."""

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


def load_wine_table(n_per_class=60, seed=0):
    """Rows of (cultivar, alcohol, malic acid, ash, magnesium, flavanoids), as in wine.data."""
    rng = np.random.default_rng(seed)
    rows = []
    for cultivar, (alcohol, flavanoids) in enumerate([(13.7, 2.9), (12.3, 2.0), (13.1, 0.8)], start=1):
        feats = np.column_stack([
            rng.normal(alcohol, 0.5, n_per_class),
            rng.normal(2.0 + cultivar * 0.5, 0.8, n_per_class),
            rng.normal(2.4, 0.2, n_per_class),
            rng.normal(100, 12, n_per_class),
            rng.normal(flavanoids, 0.4, n_per_class),
        ])
        rows.append(np.column_stack([np.full(n_per_class, cultivar), feats]))
    return np.concatenate(rows)


torch.manual_seed(0)
table = load_wine_table()
features = torch.tensor(table[:, 1:], dtype=torch.float32)
features = (features - features.mean(dim=0)) / features.std(dim=0)
labels = torch.tensor(table[:, 0], dtype=torch.long)  # cause: op_error

model = nn.Sequential(nn.Linear(5, 16), nn.ReLU(), nn.Linear(16, 3))
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
for epoch in range(50):
    logits = model(features)
    loss = F.cross_entropy(logits, labels)  # expect: op_error
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if epoch % 10 == 0:
        acc = (logits.argmax(dim=1) == labels).float().mean()
        print(f"epoch {epoch}: loss {loss.item():.4f}, acc {acc.item():.2f}")
