"""Tiny causal transformer LM moved to an accelerator ('meta' stands in for 'cuda'); bug: forward() builds the causal mask with torch.tril(torch.ones(T, T)) on the CPU instead of on x.device."""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

DEVICE = torch.device("meta")  # use "cuda" on a machine with a GPU
VOCAB, BLOCK, EMBD = 32, 16, 32


class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd, n_head):
        super().__init__()
        self.n_head = n_head
        self.qkv = nn.Linear(n_embd, 3 * n_embd)
        self.proj = nn.Linear(n_embd, n_embd)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        att = q @ k.transpose(-2, -1) / math.sqrt(k.size(-1))
        mask = torch.tril(torch.ones(T, T))  # cause: device_mismatch
        att = att.masked_fill(mask == 0, float("-inf"))  # expect: device_mismatch
        y = F.softmax(att, dim=-1) @ v
        return self.proj(y.transpose(1, 2).contiguous().view(B, T, C))


class TinyLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(VOCAB, EMBD)
        self.pos = nn.Parameter(torch.zeros(BLOCK, EMBD))
        self.ln = nn.LayerNorm(EMBD)
        self.attn = CausalSelfAttention(EMBD, n_head=4)
        self.head = nn.Linear(EMBD, VOCAB)

    def forward(self, idx):
        x = self.tok(idx) + self.pos[: idx.size(1)]
        x = x + self.attn(self.ln(x))
        return self.head(x)


torch.manual_seed(0)
model = TinyLM().to(DEVICE)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
for step in range(10):
    seq = torch.randint(0, VOCAB, (8, BLOCK + 1), device=DEVICE)
    logits = model(seq[:, :-1])
    loss = F.cross_entropy(logits.reshape(-1, VOCAB), seq[:, 1:].reshape(-1))
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
    print(f"step {step}: loss {loss.item():.4f}")
