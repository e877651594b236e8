"""Logistic regression on a numpy table: (N, D) - (D,) and keepdim standardisation, (N, 1) * (N, D) weights, clamped manual log-loss (clean)."""

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

rng = np.random.default_rng(0)
torch.manual_seed(0)

# --- data: a float64 numpy table, converted once to float32 tensors ---
n_samples, n_features = 400, 6
X_np = rng.normal(loc=5.0, scale=[1.0, 2.0, 0.5, 3.0, 1.0, 10.0], size=(n_samples, n_features))
true_w = np.array([1.5, -2.0, 0.0, 0.7, 0.0, 0.1])
logit_np = (X_np - X_np.mean(axis=0)) @ true_w
y_np = (logit_np + rng.normal(scale=0.5, size=n_samples) > 0).astype(np.float32)

X = torch.from_numpy(X_np).float()
y = torch.from_numpy(y_np)  # (N,)

perm = torch.randperm(n_samples)
train_idx, val_idx = perm[:300], perm[300:]
X_train, X_val = X[train_idx], X[val_idx]
y_train, y_val = y[train_idx], y[val_idx]

# standardise with statistics of the training split only
mean = X_train.mean(dim=0)  # (D,)
std = X_train.std(dim=0)  # (D,)
X_train = (X_train - mean) / std  # (N, D) - (D,)
X_val = (X_val - mean) / std

# a per-row standardisation (keepdim) used as an extra feature block
row_z = (X_train - X_train.mean(dim=1, keepdim=True)) / X_train.std(dim=1, keepdim=True)
assert row_z.shape == X_train.shape

# up-weight the positive class: (N, 1) weights times (N, D) features
pos_frac = y_train.mean()
sample_w = torch.where(y_train > 0.5, 0.5 / pos_frac, 0.5 / (1 - pos_frac)).unsqueeze(1)
weighted_mean = (sample_w * X_train).sum(dim=0) / sample_w.sum()
print("weighted feature mean:", [round(v, 3) for v in weighted_mean.tolist()])

loader = DataLoader(TensorDataset(X_train, y_train), batch_size=32, shuffle=True, num_workers=0)
model = nn.Linear(n_features, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
criterion = nn.BCEWithLogitsLoss()

for epoch in range(5):
    model.train()
    total = 0.0
    for xb, yb in loader:
        logits = model(xb).squeeze(1)  # (B,)
        loss = criterion(logits, yb)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total += loss.item() * len(xb)

    model.eval()
    with torch.no_grad():
        val_logits = model(X_val).squeeze(1)
        p = torch.sigmoid(val_logits).clamp(1e-7, 1 - 1e-7)
        val_nll = -(y_val * torch.log(p) + (1 - y_val) * torch.log(1 - p)).mean()
        val_acc = ((val_logits > 0).float() == y_val).float().mean()
        check = F.binary_cross_entropy_with_logits(val_logits, y_val)
    assert abs(val_nll.item() - check.item()) < 1e-3
    print(f"epoch {epoch}: train loss {total / len(X_train):.4f} "
          f"val nll {val_nll.item():.4f} val acc {val_acc.item():.3f}")

print("learned weights:", np.round(model.weight.detach().numpy().ravel() / std.numpy(), 2))
