"""Review classifier with attention pooling over padded word sequences; bug: a review made only of unknown words has length 0, its scores row is all -inf after masking, and softmax of it is NaN."""

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)

REVIEWS = [
    ("great acting and a great story", 1),
    ("zzzz qqqq", 0),  # nothing in the vocabulary survives
    ("boring plot and bad acting", 0),
    ("a lovely and moving film", 1),
    ("bad film , boring story", 0),
    ("great fun , lovely cast", 1),
    ("dull , bad and slow", 0),
    ("moving story , great cast", 1),
]
VOCAB = {"<pad>": 0}
for word in "great acting and a story boring plot bad lovely moving film fun cast dull slow".split():
    VOCAB[word] = len(VOCAB)


def encode_batch(texts):
    ids = [[VOCAB[w] for w in text.split() if w in VOCAB] for text in texts]
    max_len = max(max(len(x) for x in ids), 1)
    tokens = torch.zeros(len(ids), max_len, dtype=torch.long)
    for i, seq in enumerate(ids):
        tokens[i, : len(seq)] = torch.tensor(seq, dtype=torch.long)
    lengths = torch.tensor([len(seq) for seq in ids])
    return tokens, lengths


class AttentionPoolClassifier(nn.Module):
    def __init__(self, vocab_size, dim=16):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, dim, padding_idx=0)
        self.score = nn.Linear(dim, 1)
        self.out = nn.Linear(dim, 2)

    def forward(self, tokens, lengths):
        h = self.embed(tokens)  # (B, T, D)
        scores = self.score(h).squeeze(-1)  # (B, T)
        padding = torch.arange(tokens.size(1))[None, :] >= lengths[:, None]
        scores = scores.masked_fill(padding, float("-inf"))
        weights = torch.softmax(scores, dim=-1)  # expect: nonfinite
        pooled = (weights.unsqueeze(-1) * h).sum(dim=1)
        return self.out(pooled)


texts, labels = zip(*REVIEWS)
tokens, lengths = encode_batch(texts)
labels = torch.tensor(labels)
model = AttentionPoolClassifier(len(VOCAB))
optimizer = torch.optim.Adam(model.parameters(), lr=0.05)
for epoch in range(20):
    loss = F.cross_entropy(model(tokens, lengths), labels)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if epoch % 5 == 0:
        print(f"epoch {epoch}: loss {loss.item():.4f}")
