"""Binary classifier adapted from the MNIST example's forward (which ends in log_softmax over dim=1) by giving it one output; bug: log_softmax over the size-1 dim of the (N, 1) logits is 0 whatever the input, so BCEWithLogitsLoss sits at log(2) = 0.693 and training never moves."""

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset


class Net(nn.Module):
    def __init__(self, n_features):
        super().__init__()
        self.fc1 = nn.Linear(n_features, 32)
        self.dropout = nn.Dropout(0.2)
        self.fc2 = nn.Linear(32, 1)

    def forward(self, x):
        x = F.relu(self.fc1(x))
        x = self.dropout(x)
        x = self.fc2(x)
        output = F.log_softmax(x, dim=1)  # expect: degenerate_op
        return output


def two_moons(n, noise=0.1):
    t = torch.rand(n) * torch.pi
    upper = torch.stack([torch.cos(t), torch.sin(t)], dim=1)
    lower = torch.stack([1 - torch.cos(t), 0.5 - torch.sin(t)], dim=1)
    x = torch.cat([upper, lower]) + noise * torch.randn(2 * n, 2)
    y = torch.cat([torch.zeros(n), torch.ones(n)])
    return x, y


torch.manual_seed(0)
x, y = two_moons(256)
loader = DataLoader(TensorDataset(x, y.unsqueeze(1)), batch_size=64, shuffle=True)
model = Net(2)
criterion = nn.BCEWithLogitsLoss()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
for epoch in range(5):
    model.train()
    total = 0.0
    for xb, yb in loader:
        optimizer.zero_grad()
        loss = criterion(model(xb), yb)
        loss.backward()
        optimizer.step()
        total += loss.item() * len(xb)
    print(f"epoch {epoch}: loss {total / len(x):.4f}")
