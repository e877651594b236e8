"""3-class classifier; bug: argmax(keepdim=True) preds (N, 1) == labels (N,) is an (N, N) matrix, so the accuracy is ~1/3 whatever the model does."""

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)

centers = torch.tensor([[5.0, 3.4, 1.5, 0.2], [5.9, 2.8, 4.3, 1.3], [6.6, 3.0, 5.6, 2.0]])
labels = torch.arange(3).repeat_interleave(50)
features = centers[labels] + 0.3 * torch.randn(150, 4)
features = (features - features.mean(0)) / features.std(0)

loader = DataLoader(TensorDataset(features, labels), batch_size=30, shuffle=True)
model = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 3))
optimizer = torch.optim.Adam(model.parameters(), lr=0.05)


def accuracy(logits, y):
    preds = logits.argmax(dim=1, keepdim=True)
    return (preds == y).float().mean().item()  # expect: broadcast


for epoch in range(15):
    for xb, yb in loader:
        loss = F.cross_entropy(model(xb), yb)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    if epoch % 5 == 4:
        with torch.no_grad():
            acc = accuracy(model(features), labels)
        print(f"epoch {epoch}: loss {loss.item():.4f} accuracy {acc:.3f}")
