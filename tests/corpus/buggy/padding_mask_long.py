"""Self-attention text classifier with an int64 attention_mask; bug: masked_fill gets `1 - attention_mask` (int64) instead of a bool mask."""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)

VOCAB = {"<pad>": 0, "<cls>": 1}
for word in "the a film plot was great awful boring superb dull fine".split():
    VOCAB[word] = len(VOCAB)


def tokenize(sentences, max_len=8):
    """Returns input_ids and attention_mask, both int64, like common tokenizers do."""
    input_ids = torch.zeros(len(sentences), max_len, dtype=torch.long)
    attention_mask = torch.zeros(len(sentences), max_len, dtype=torch.long)
    for i, sentence in enumerate(sentences):
        ids = [VOCAB["<cls>"]] + [VOCAB[w] for w in sentence.split()][: max_len - 1]
        input_ids[i, : len(ids)] = torch.tensor(ids)
        attention_mask[i, : len(ids)] = 1
    return input_ids, attention_mask


class SelfAttentionClassifier(nn.Module):
    def __init__(self, vocab_size, d_model=32, n_classes=2):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, d_model, padding_idx=0)
        self.q = nn.Linear(d_model, d_model)
        self.k = nn.Linear(d_model, d_model)
        self.v = nn.Linear(d_model, d_model)
        self.out = nn.Linear(d_model, n_classes)

    def forward(self, input_ids, attention_mask):
        x = self.embed(input_ids)  # (B, T, C)
        scores = self.q(x) @ self.k(x).transpose(1, 2) / math.sqrt(x.size(-1))  # (B, T, T)
        pad = (1 - attention_mask).unsqueeze(1)  # (B, 1, T), 1 where padding
        scores = scores.masked_fill(pad, float("-inf"))  # expect: dtype_mismatch
        h = F.softmax(scores, dim=-1) @ self.v(x)
        return self.out(h[:, 0])  # the <cls> position


positive = ["the film was great", "a superb plot", "the plot was fine", "great film"]
negative = ["the film was awful", "a boring plot", "the plot was dull", "awful boring film"]
input_ids, attention_mask = tokenize(positive + negative)
labels = torch.tensor([1] * len(positive) + [0] * len(negative))

model = SelfAttentionClassifier(len(VOCAB))
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
for epoch in range(30):
    loss = F.cross_entropy(model(input_ids, attention_mask), labels)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if epoch % 10 == 0:
        print(f"epoch {epoch}: loss {loss.item():.4f}")
