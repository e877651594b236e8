"""Human-activity classifier on windows of accelerometer readings; bug: nn.LSTM is built without batch_first=True, so the (32, 20, 6) batch is read as 32 time steps of a batch of 20, h_n[-1] holds 20 rows, and the loss fails on 20 outputs for 32 labels."""

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset


class ActivityWindows(Dataset):
    """Sine-like accelerometer traces whose frequency depends on the activity."""

    def __init__(self, n=256, window=20, channels=6, n_classes=4, seed=0):
        g = torch.Generator().manual_seed(seed)
        self.labels = torch.randint(0, n_classes, (n,), generator=g)
        t = torch.arange(window).float()
        freq = (1 + self.labels.float()).view(-1, 1, 1) * 0.2
        phase = torch.rand(n, 1, channels, generator=g) * 6.28
        self.x = torch.sin(freq * t.view(1, -1, 1) + phase) + 0.1 * torch.randn(n, window, channels, generator=g)

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return self.x[i], self.labels[i]


class LSTMClassifier(nn.Module):
    def __init__(self, n_channels, hidden, n_classes):
        super().__init__()
        self.lstm = nn.LSTM(n_channels, hidden, num_layers=1)
        self.fc = nn.Linear(hidden, n_classes)

    def forward(self, x):
        _, (h_n, _) = self.lstm(x)  # cause: shape_mismatch
        return self.fc(h_n[-1])


torch.manual_seed(0)
loader = DataLoader(ActivityWindows(), batch_size=32, shuffle=True)
model = LSTMClassifier(n_channels=6, hidden=32, n_classes=4)
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
for epoch in range(3):
    for windows, activity in loader:
        logits = model(windows)
        loss = criterion(logits, activity)  # expect: shape_mismatch
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"epoch {epoch}: loss {loss.item():.4f}")
