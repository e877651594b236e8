"""A small CNN for the image, an MLP for the metadata, fused by concatenation."""

import torch
import torch.nn as nn


class ImageMetaNet(nn.Module):
    def __init__(self, n_meta, n_classes, width=32):
        super().__init__()
        self.cnn = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(16, width, 3, padding=1),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(1),
        )
        self.proj = nn.Linear(width, width)
        self.dropout = nn.Dropout(0.2)
        self.meta = nn.Sequential(nn.Linear(n_meta, 16), nn.ReLU())
        self.head = nn.Linear(width + 16, n_classes)

    def forward(self, image, meta):
        features = self.cnn(image).squeeze()  # cause: shape_mismatch
        z = self.dropout(torch.relu(self.proj(features)))
        m = self.meta(meta)
        h = torch.cat([z, m], dim=1)  # expect: shape_mismatch
        return self.head(h)
