"""Class-weighted cross-entropy on an accelerator ('meta' stands in for 'cuda'); bug: model and batches are on DEVICE, the class weights on the CPU."""

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

DEVICE = torch.device("meta")  # use "cuda" on a machine with a GPU

torch.manual_seed(0)
counts = torch.tensor([400, 80, 20])
labels = torch.cat([torch.full((int(c),), i) for i, c in enumerate(counts)])
features = torch.randn(len(labels), 8) + labels[:, None].float()
loader = DataLoader(TensorDataset(features, labels), batch_size=64, shuffle=True)

# inverse-frequency weights so that the rare classes count
class_weights = counts.sum() / (len(counts) * counts.float())  # cause: device_mismatch

model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 3)).to(DEVICE)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)

for epoch in range(3):
    for xb, yb in loader:
        xb, yb = xb.to(DEVICE), yb.to(DEVICE)
        logits = model(xb)
        loss = F.cross_entropy(logits, yb, weight=class_weights)  # expect: device_mismatch
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"epoch {epoch}: loss {loss.item():.4f}")
