"""Grayscale-digit CNN reused on RGB images; bug: the first Conv2d still has in_channels=1 and the (B, 3, 32, 32) batch is rejected."""

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset


class SmallCNN(nn.Module):
    def __init__(self, num_classes=10, in_channels=1):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(in_channels, 16, 3, padding=1),  # cause: shape_mismatch
            nn.BatchNorm2d(16),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1),
            nn.BatchNorm2d(32),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(1),
        )
        self.classifier = nn.Linear(32, num_classes)

    def forward(self, x):
        x = self.features(x)  # expect: shape_mismatch
        return self.classifier(torch.flatten(x, 1))


torch.manual_seed(0)
images = torch.rand(64, 3, 32, 32)  # RGB now
labels = torch.randint(0, 10, (64,))
mean = images.mean(dim=(0, 2, 3), keepdim=True)
std = images.std(dim=(0, 2, 3), keepdim=True)
loader = DataLoader(TensorDataset((images - mean) / std, labels), batch_size=16, shuffle=True)

model = SmallCNN(num_classes=10)
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
for epoch in range(2):
    for xb, yb in loader:
        loss = F.cross_entropy(model(xb), yb)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"epoch {epoch}: loss {loss.item():.4f}")
