"""A 1-D CNN over spectrogram frames: Conv1d blocks over time, global pooling, a linear head."""

import torch.nn as nn


class KeywordNet(nn.Module):
    def __init__(self, n_freq, n_classes, channels=32):
        super().__init__()
        self.conv = nn.Sequential(
            nn.Conv1d(n_freq, channels, kernel_size=3, padding=1),
            nn.BatchNorm1d(channels),
            nn.ReLU(),
            nn.Conv1d(channels, channels, kernel_size=3, padding=1),
            nn.BatchNorm1d(channels),
            nn.ReLU(),
        )
        self.pool = nn.AdaptiveMaxPool1d(1)
        self.fc = nn.Linear(channels, n_classes)

    def forward(self, spec):
        h = self.conv(spec)  # expect: shape_mismatch
        return self.fc(self.pool(h).squeeze(-1))
