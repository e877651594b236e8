"""Keyword-spotting CNN on spectrograms, each scaled by its peak; bug: after unsqueeze(1) adds the channel dim, spec.amax(dim=1, keepdim=True) reduces over that size-1 channel dim instead of the frequencies: it reduces nothing, spec / peak is 1 everywhere and the network sees a constant input."""

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

N_MELS, FRAMES, N_WORDS = 16, 20, 4


def synthetic_spectrograms(n, seed=0):
    """Each keyword puts its energy in its own band of mel bins."""
    g = torch.Generator().manual_seed(seed)
    words = torch.randint(0, N_WORDS, (n,), generator=g)
    spec = 0.1 + torch.rand(n, N_MELS, FRAMES, generator=g)
    for i, w in enumerate(words.tolist()):
        spec[i, 4 * w : 4 * w + 4] += 3.0 * torch.rand(4, FRAMES, generator=g)
    return spec, words


class KeywordCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, padding=1)
        self.conv2 = nn.Conv2d(8, 16, 3, padding=1)
        self.fc = nn.Linear(16, N_WORDS)

    def forward(self, spec):
        x = spec.unsqueeze(1)
        peak = x.amax(dim=1, keepdim=True)  # expect: degenerate_op
        x = x / peak
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.relu(self.conv2(x))
        return self.fc(x.mean(dim=(2, 3)))


torch.manual_seed(0)
spec, words = synthetic_spectrograms(256)
loader = DataLoader(TensorDataset(spec, words), batch_size=32, shuffle=True)
model = KeywordCNN()
optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
for epoch in range(3):
    correct = 0
    for xb, yb in loader:
        logits = model(xb)
        loss = F.cross_entropy(logits, yb)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        correct += (logits.argmax(dim=1) == yb).sum().item()
    print(f"epoch {epoch}: loss {loss.item():.4f}, train acc {correct / len(words):.2f}")
