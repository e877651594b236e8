"""Review sentiment classifier that logs dataset statistics first; bug: the lengths counted with (padded != PAD).sum(dim=1) are int64, and .mean() of an int64 tensor raises."""

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils.rnn import pad_sequence
from torch.utils.data import DataLoader, TensorDataset

PAD, VOCAB = 0, 100


def synthetic_reviews(n, seed=0):
    g = torch.Generator().manual_seed(seed)
    reviews, labels = [], []
    for _ in range(n):
        length = int(torch.randint(4, 20, (1,), generator=g))
        label = int(torch.randint(0, 2, (1,), generator=g))
        low, high = (1, 60) if label == 0 else (40, VOCAB)
        reviews.append(torch.randint(low, high, (length,), generator=g))
        labels.append(label)
    return reviews, torch.tensor(labels)


class MeanPoolClassifier(nn.Module):
    def __init__(self, vocab_size, dim=32):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, dim, padding_idx=PAD)
        self.out = nn.Linear(dim, 2)

    def forward(self, tokens):
        mask = (tokens != PAD).unsqueeze(-1).float()
        pooled = (self.embedding(tokens) * mask).sum(1) / mask.sum(1).clamp(min=1)
        return self.out(pooled)


torch.manual_seed(0)
reviews, labels = synthetic_reviews(200)
padded = pad_sequence(reviews, batch_first=True, padding_value=PAD)
lengths = (padded != PAD).sum(dim=1)  # cause: dtype_mismatch
print(f"{len(padded)} reviews, mean length {lengths.mean():.1f} tokens")  # expect: dtype_mismatch

loader = DataLoader(TensorDataset(padded, labels), batch_size=32, shuffle=True)
model = MeanPoolClassifier(VOCAB)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
for epoch in range(3):
    for tokens, target in loader:
        loss = F.cross_entropy(model(tokens), target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"epoch {epoch}: loss {loss.item():.4f}")
