"""AlexNet, scaled down for 32x32 inputs (torchvision.models.alexnet's structure)."""

import torch
import torch.nn as nn


class SmallAlexNet(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 32, kernel_size=3, stride=1, padding=1),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(kernel_size=2),
            nn.Conv2d(32, 64, kernel_size=3, padding=1),
            nn.ReLU(inplace=True),
            nn.Conv2d(64, 64, kernel_size=3, padding=1),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(kernel_size=2),
        )
        self.avgpool = nn.AdaptiveAvgPool2d((cfg.pool_size, cfg.pool_size))
        self.classifier = nn.Sequential(
            nn.Dropout(p=cfg.dropout),
            nn.Linear(64 * 6 * 6, 256),
            nn.ReLU(inplace=True),
            nn.Dropout(p=cfg.dropout),
            nn.Linear(256, 256),
            nn.ReLU(inplace=True),
            nn.Linear(256, cfg.num_classes),
        )

    def forward(self, x):
        x = self.features(x)
        x = self.avgpool(x)  # cause: shape_mismatch
        x = torch.flatten(x, 1)
        x = self.classifier(x)  # expect: shape_mismatch
        return x
