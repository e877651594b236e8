"""Classifier trained from a CSV parsed with np.loadtxt; bug: the class column comes out float64 and nn.CrossEntropyLoss rejects float class-index targets ("expected target dtype to be Long")."""

import io

import numpy as np
import torch
import torch.nn as nn

rng = np.random.default_rng(0)
torch.manual_seed(0)

# write a small CSV in memory: four sensor readings, then the machine state (0, 1 or 2)
rows = []
for state, offset in enumerate([0.0, 1.5, 3.0]):
    readings = rng.normal(offset, 0.7, size=(50, 4))
    rows += [",".join(f"{v:.4f}" for v in r) + f",{state}" for r in readings]
csv_text = "temp,vibration,current,pressure,state\n" + "\n".join(rows)

data = np.loadtxt(io.StringIO(csv_text), delimiter=",", skiprows=1)
features = torch.from_numpy(data[:, :4]).float()
labels = torch.from_numpy(data[:, 4])

model = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 3))
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for epoch in range(30):
    perm = torch.randperm(len(features))
    for i in range(0, len(features), 25):
        idx = perm[i : i + 25]
        outputs = model(features[idx])
        loss = criterion(outputs, labels[idx])  # expect: dtype_mismatch
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    if epoch % 10 == 0:
        print(f"epoch {epoch}: loss {loss.item():.4f}")
