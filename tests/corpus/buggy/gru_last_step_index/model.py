"""A GRU over padded traces; the classifier reads each sequence's last valid output."""

import torch
import torch.nn as nn


class GestureGRU(nn.Module):
    def __init__(self, in_features, hidden, n_classes):
        super().__init__()
        self.gru = nn.GRU(in_features, hidden, batch_first=True)
        self.classifier = nn.Sequential(nn.LayerNorm(hidden), nn.Linear(hidden, n_classes))

    def forward(self, x, lengths):
        out, _ = self.gru(x)  # (B, T, hidden); padded steps are ignored below
        B = out.size(0)
        last = out[torch.arange(B), lengths]  # expect: op_error
        return self.classifier(last)
