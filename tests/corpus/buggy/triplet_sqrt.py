"""Batch-hard triplet loss; bug: squared distances from the |a|^2 - 2ab + |b|^2 expansion dip below 0 on the diagonal and torch.sqrt gives NaN."""

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


def pairwise_distances(embeddings):
    dot = embeddings @ embeddings.T  # (B, B)
    square_norm = (embeddings**2).sum(dim=1)  # (B,)
    d2 = square_norm.unsqueeze(0) - 2.0 * dot + square_norm.unsqueeze(1)
    dist = torch.sqrt(d2)  # expect: nonfinite
    return dist


def batch_hard_triplet_loss(labels, embeddings, margin=0.5):
    dist = pairwise_distances(embeddings)
    same = labels[:, None] == labels[None, :]
    eye = torch.eye(len(labels), dtype=torch.bool)
    hardest_positive = dist.masked_fill(~same | eye, 0.0).max(dim=1).values
    hardest_negative = dist.masked_fill(same, float("inf")).min(dim=1).values
    return F.relu(hardest_positive - hardest_negative + margin).mean()


n_classes, per_class, dim = 8, 8, 16
prototypes = torch.randn(n_classes, dim) * 2.0
labels_all = torch.arange(n_classes).repeat_interleave(per_class)
data = prototypes[labels_all] + torch.randn(len(labels_all), dim)

embedder = nn.Sequential(nn.Linear(dim, 64), nn.ReLU(), nn.Linear(64, 32), nn.ReLU())
optimizer = torch.optim.Adam(embedder.parameters(), lr=1e-3)
for step in range(30):
    perm = torch.randperm(len(data))[:32]
    loss = batch_hard_triplet_loss(labels_all[perm], embedder(data[perm]))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if step % 10 == 0:
        print(f"step {step}: triplet loss {loss.item():.4f}")
