"""Causal attention LM with an attention-entropy penalty; bug: masked weights are exactly 0, so att * log(att) is 0 * -inf = NaN and the loss is NaN."""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)

VOCAB, T, C = 16, 12, 32


class TinyAttentionLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(VOCAB, C)
        self.pos = nn.Embedding(T, C)
        self.qkv = nn.Linear(C, 3 * C)
        self.proj = nn.Linear(C, C)
        self.lm_head = nn.Linear(C, VOCAB)
        self.register_buffer("mask", torch.tril(torch.ones(T, T)).view(1, T, T))

    def forward(self, idx):
        B, L = idx.shape
        x = self.tok(idx) + self.pos(torch.arange(L))
        q, k, v = self.qkv(x).split(C, dim=2)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(C)
        att = att.masked_fill(self.mask[:, :L, :L] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        x = x + self.proj(att @ v)
        return self.lm_head(x), att


def attention_entropy(att):
    """Mean entropy of the attention distributions, in nats."""
    ent = -(att * torch.log(att)).sum(dim=-1).mean()  # expect: nonfinite
    return ent


def make_batch(batch_size):
    # sequences that count upwards modulo VOCAB from a random start
    start = torch.randint(0, VOCAB, (batch_size, 1))
    seq = (start + torch.arange(T + 1)) % VOCAB
    return seq[:, :-1], seq[:, 1:]


model = TinyAttentionLM()
optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
for step in range(20):
    x, y = make_batch(16)
    logits, att = model(x)
    ce = F.cross_entropy(logits.reshape(-1, VOCAB), y.reshape(-1))
    loss = ce + 0.01 * attention_entropy(att)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if step % 5 == 0:
        print(f"step {step}: ce {ce.item():.4f} loss {loss.item():.4f}")
