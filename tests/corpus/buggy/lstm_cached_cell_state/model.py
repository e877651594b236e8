"""An LSTM over sensor windows with a learned initial hidden state, and a linear head."""

import torch
import torch.nn as nn


class Forecaster(nn.Module):
    def __init__(self, n_sensors, hidden_size=32, num_layers=2):
        super().__init__()
        self.num_layers = num_layers
        self.hidden_size = hidden_size
        self.h0 = nn.Parameter(torch.zeros(num_layers, 1, hidden_size))
        self._c0 = None
        self.lstm = nn.LSTM(n_sensors, hidden_size, num_layers, batch_first=True)
        self.head = nn.Linear(hidden_size, 1)

    def initial_state(self, batch_size):
        h0 = self.h0.expand(-1, batch_size, -1).contiguous()
        if self._c0 is None:  # allocate the zero cell state once
            self._c0 = torch.zeros(self.num_layers, batch_size, self.hidden_size)  # cause: shape_mismatch
        return h0, self._c0

    def forward(self, x):
        state = self.initial_state(x.size(0))
        out, _ = self.lstm(x, state)  # expect: shape_mismatch
        return self.head(out[:, -1])
