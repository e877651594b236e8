"""Sequence classifier: MultiheadAttention with a triu(-inf, diagonal=1) mask, an additive -inf mask, bool padding masks and masked mean pooling (clean)."""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)

PAD = 0
VOCAB = 20
MAX_LEN = 12


def make_batch(batch_size):
    """Label 1 if token 7 occurs in the sequence. Sequences are right-padded with PAD."""
    lengths = torch.randint(3, MAX_LEN + 1, (batch_size,))
    tokens = torch.randint(1, VOCAB, (batch_size, MAX_LEN))
    positions = torch.arange(MAX_LEN).expand(batch_size, MAX_LEN)
    pad_mask = positions >= lengths[:, None]  # (B, T) True where padding
    tokens = tokens.masked_fill(pad_mask, PAD)
    labels = ((tokens == 7) & ~pad_mask).any(dim=1).long()
    return tokens, lengths, labels


def causal_mask(size):
    return torch.triu(torch.full((size, size), float("-inf")), diagonal=1)


class ScaledDotAttention(nn.Module):
    def __init__(self, d_model):
        super().__init__()
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.d_model = d_model

    def forward(self, x, additive_mask):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_model)  # (B, T, T)
        scores = scores + additive_mask  # (B, T, T) + (T, T)
        weights = F.softmax(scores, dim=-1)
        return weights @ v


class Classifier(nn.Module):
    def __init__(self, d_model=32, n_heads=4):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, d_model, padding_idx=PAD)
        self.pos = nn.Parameter(torch.randn(MAX_LEN, d_model) * 0.02)
        self.mha = nn.MultiheadAttention(d_model, n_heads, batch_first=True)
        self.attn = ScaledDotAttention(d_model)
        self.norm = nn.LayerNorm(d_model)
        self.out = nn.Linear(d_model, 2)

    def forward(self, tokens, lengths):
        B, T = tokens.shape
        x = self.embed(tokens) + self.pos[:T]  # (B, T, C) + (T, C)
        mask = causal_mask(T)
        h, _ = self.mha(x, x, x, attn_mask=mask, need_weights=False)
        h = self.norm(x + h)
        h = h + self.attn(h, mask)
        keep = torch.arange(T)[None, :] < lengths[:, None]  # (B, T) bool
        h = h.masked_fill(~keep.unsqueeze(-1), 0.0)
        summed = h.sum(dim=1)  # (B, C)
        counts = keep.sum(dim=1, keepdim=True).to(h.dtype)  # (B, 1)
        pooled = summed / counts
        return self.out(pooled)


model = Classifier()
optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
for step in range(60):
    tokens, lengths, labels = make_batch(32)
    logits = model(tokens, lengths)
    loss = F.cross_entropy(logits, labels)
    optimizer.zero_grad()
    loss.backward()
    nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
    optimizer.step()
    if step % 20 == 0:
        print(f"step {step}: loss {loss.item():.4f}")

model.eval()
with torch.no_grad():
    tokens, lengths, labels = make_batch(128)
    acc = (model(tokens, lengths).argmax(dim=-1) == labels).float().mean()
print(f"final loss {loss.item():.4f}, eval accuracy {acc.item():.3f}")
