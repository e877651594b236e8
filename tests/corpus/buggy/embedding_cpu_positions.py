"""Tiny transformer text classifier moved to the GPU, run shape-only (CUDA simulated without one); bug: forward() builds the position ids with torch.arange(T) on the CPU, and the position nn.Embedding, whose weight is on the GPU, gets a CPU index tensor."""
# corpus: shape-only (meta tensors do not check an embedding's index device; a GPU does)

import torch
import torch.nn as nn
import torch.nn.functional as F

DEVICE = "cuda"
VOCAB, MAX_LEN, D_MODEL, N_CLASSES = 500, 32, 32, 4


class TextTransformer(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok_emb = nn.Embedding(VOCAB, D_MODEL)
        self.pos_emb = nn.Embedding(MAX_LEN, D_MODEL)
        layer = nn.TransformerEncoderLayer(D_MODEL, nhead=4, dim_feedforward=64, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers=1, enable_nested_tensor=False)
        self.cls = nn.Linear(D_MODEL, N_CLASSES)

    def forward(self, idx):
        B, T = idx.shape
        positions = torch.arange(T)  # cause: device_mismatch
        x = self.tok_emb(idx) + self.pos_emb(positions)  # expect: device_mismatch
        x = self.encoder(x)
        return self.cls(x.mean(dim=1))


torch.manual_seed(0)
model = TextTransformer().to(DEVICE)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
for step in range(10):
    tokens = torch.randint(0, VOCAB, (16, MAX_LEN), device=DEVICE)
    labels = torch.randint(0, N_CLASSES, (16,), device=DEVICE)
    loss = F.cross_entropy(model(tokens), labels)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step}")
