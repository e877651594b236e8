"""PatchTST-style time-series classifier (patching by reshape, a linear patch embedding, multi-head self-attention written out with view/transpose/reshape, LayerNorm, mean pooling, a linear head) on synthetic multichannel signals; bug: the pooling averages with h.mean(dim=-1) over the 32 model dims instead of dim=1 over the 8 patches, so the head, built for 32 features, gets (B, 8); the reshapes before it change other dims and are not the cause."""

import argparse
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset


class PatchClassifier(nn.Module):
    def __init__(self, seq_len, n_channels, patch_len, d_model, n_heads, n_classes):
        super().__init__()
        self.patch_len = patch_len
        self.n_heads = n_heads
        self.d_model = d_model
        self.embed = nn.Linear(patch_len * n_channels, d_model)
        self.pos = nn.Parameter(torch.zeros(seq_len // patch_len, d_model))
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.out = nn.Linear(d_model, d_model)
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, n_classes)

    def forward(self, x):
        B, L, C = x.shape
        patches = x.reshape(B, L // self.patch_len, self.patch_len * C)
        h = self.embed(patches) + self.pos
        q, k, v = self.qkv(h).chunk(3, dim=-1)
        q = q.view(B, -1, self.n_heads, self.d_model // self.n_heads).transpose(1, 2)
        k = k.view(B, -1, self.n_heads, self.d_model // self.n_heads).transpose(1, 2)
        v = v.view(B, -1, self.n_heads, self.d_model // self.n_heads).transpose(1, 2)
        att = F.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.size(-1)), dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, -1, self.d_model)
        h = self.norm(h + self.out(y))
        pooled = h.mean(dim=-1)  # cause: shape_mismatch
        return self.head(pooled)  # expect: shape_mismatch


def make_signals(n, seq_len, n_channels, n_classes, generator):
    labels = torch.randint(0, n_classes, (n,), generator=generator)
    t = torch.linspace(0, 1, seq_len).view(1, -1, 1)
    freq = (2.0 + 3.0 * labels.float()).view(-1, 1, 1)
    phase = torch.rand(n, 1, n_channels, generator=generator) * 2 * math.pi
    x = torch.sin(2 * math.pi * freq * t + phase) + 0.2 * torch.randn(n, seq_len, n_channels, generator=generator)
    return x, labels


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seq-len", type=int, default=64)
    parser.add_argument("--patch-len", type=int, default=8)
    parser.add_argument("--d-model", type=int, default=32)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--epochs", type=int, default=3)
    args = parser.parse_args()

    g = torch.Generator().manual_seed(0)
    torch.manual_seed(0)
    x, y = make_signals(128, args.seq_len, 3, 5, g)
    train_loader = DataLoader(TensorDataset(x[:96], y[:96]), batch_size=args.batch_size, shuffle=True)
    model = PatchClassifier(args.seq_len, 3, args.patch_len, args.d_model, n_heads=4, n_classes=5)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for epoch in range(args.epochs):
        model.train()
        for xb, yb in train_loader:
            loss = F.cross_entropy(model(xb), yb)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        model.eval()
        with torch.no_grad():
            acc = (model(x[96:]).argmax(-1) == y[96:]).float().mean().item()
        print(f"epoch {epoch}: loss {loss.item():.4f} val acc {acc:.2%}")


if __name__ == "__main__":
    main()
