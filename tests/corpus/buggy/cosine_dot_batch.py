"""Paraphrase retrieval with a bag-of-words encoder trained on cosine similarity; bug: torch.dot of the (B, D) query and key batches, two matrices, where the row-wise product (q * k).sum(-1) was meant."""

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

VOCAB, DIM, SEQ = 200, 32, 12


class BagEncoder(nn.Module):
    def __init__(self, vocab_size, dim):
        super().__init__()
        self.embedding = nn.EmbeddingBag(vocab_size, dim, mode="mean")
        self.proj = nn.Linear(dim, dim)

    def forward(self, tokens):
        return self.proj(self.embedding(tokens))


def cosine_similarity(a, b, eps=1e-8):
    return torch.dot(a, b) / (a.norm(dim=-1) * b.norm(dim=-1) + eps)  # expect: shape_mismatch


def make_pairs(n):
    """Each query and its paraphrase share most of their words."""
    queries = torch.randint(0, VOCAB, (n, SEQ))
    keys = queries.clone()
    swap = torch.rand(n, SEQ) < 0.25
    keys[swap] = torch.randint(0, VOCAB, (int(swap.sum()),))
    return queries, keys


torch.manual_seed(0)
queries, keys = make_pairs(256)
loader = DataLoader(TensorDataset(queries, keys), batch_size=32, shuffle=True)
encoder = BagEncoder(VOCAB, DIM)
optimizer = torch.optim.Adam(encoder.parameters(), lr=1e-3)

for epoch in range(3):
    total = 0.0
    for q, k in loader:
        sim = cosine_similarity(encoder(q), encoder(k))
        loss = (1 - sim).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total += loss.item()
    print(f"epoch {epoch}: loss {total / len(loader):.4f}")
