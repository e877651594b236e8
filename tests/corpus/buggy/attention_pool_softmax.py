"""BiGRU sentence classifier with attention pooling; bug: the attention scores are (B, T, 1) and torch.softmax(scores, dim=-1) normalises over that size-1 dim, so every weight is 1 and the "attention" is a plain sum over time."""

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

VOCAB, SEQ_LEN, N_CLASSES = 300, 24, 3


class AttentionPool(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.score = nn.Linear(dim, 1)

    def forward(self, h):
        scores = self.score(torch.tanh(h))
        weights = torch.softmax(scores, dim=-1)  # expect: degenerate_op
        return (weights * h).sum(dim=1), weights


class BiGRUClassifier(nn.Module):
    def __init__(self, vocab_size, n_classes, emb=32, hidden=32):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, emb)
        self.gru = nn.GRU(emb, hidden, batch_first=True, bidirectional=True)
        self.pool = AttentionPool(2 * hidden)
        self.out = nn.Linear(2 * hidden, n_classes)

    def forward(self, tokens):
        h, _ = self.gru(self.embedding(tokens))
        pooled, weights = self.pool(h)
        return self.out(pooled), weights


torch.manual_seed(0)
labels = torch.randint(0, N_CLASSES, (192,))
tokens = torch.randint(0, VOCAB, (192, SEQ_LEN))
tokens[:, 5] = labels * 100 + torch.randint(0, 100, (192,))  # one informative position
loader = DataLoader(TensorDataset(tokens, labels), batch_size=32, shuffle=True)
model = BiGRUClassifier(VOCAB, N_CLASSES)
optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
for epoch in range(3):
    for xb, yb in loader:
        logits, weights = model(xb)
        loss = F.cross_entropy(logits, yb)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"epoch {epoch}: loss {loss.item():.4f}, max attention weight {weights.max().item():.2f}")
