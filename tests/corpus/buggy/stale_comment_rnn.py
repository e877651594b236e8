"""A makemore-style character-level GRU language model with shape comments on its tensors: embeddings, a GRU unrolled by hand over time, teacher forcing, a DataLoader over names with a smaller last batch, and sampling; bug: the stacked hidden states' comment says (T, B, n_hidden), left from when they were stacked on dim 0; they are (B, T, n_hidden)."""

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(42)
words = ["emma", "olivia", "ava", "isabella", "sophia", "mia", "amelia", "harper", "evelyn",
         "abigail", "emily", "ella", "elizabeth", "camila", "luna", "sofia", "avery"] * 3
chars = sorted(set("".join(words)))
stoi = {s: i + 1 for i, s in enumerate(chars)}
stoi["."] = 0
itos = {i: s for s, i in stoi.items()}
vocab_size = len(stoi)
max_len = max(len(w) for w in words) + 1

# every name as a (max_len,) row of ids, padded with -1 targets the loss ignores
X = torch.zeros(len(words), max_len, dtype=torch.long)  # (N, max_len)
Y = torch.full((len(words), max_len), -1, dtype=torch.long)  # (N, max_len)
for i, w in enumerate(words):
    ix = [stoi[c] for c in w]
    X[i, 1 : 1 + len(ix)] = torch.tensor(ix)
    Y[i, : len(ix)] = torch.tensor(ix)
    Y[i, len(ix)] = 0


class CharGRU(nn.Module):
    def __init__(self, vocab_size, n_embd=16, n_hidden=32):
        super().__init__()
        self.n_hidden = n_hidden
        self.wte = nn.Embedding(vocab_size, n_embd)
        self.cell = nn.GRUCell(n_embd, n_hidden)
        self.lm_head = nn.Linear(n_hidden, vocab_size)
        self.start = nn.Parameter(torch.zeros(1, n_hidden))  # (1, n_hidden)

    def forward(self, idx):
        B, T = idx.size()
        emb = self.wte(idx)  # (B, T, n_embd)
        h = self.start.expand(B, -1)  # (B, n_hidden)
        hiddens = []
        for t in range(T):
            x_t = emb[:, t, :]  # (B, n_embd)
            h = self.cell(x_t, h)  # (B, n_hidden)
            hiddens.append(h)
        hidden = torch.stack(hiddens, 1)  # (T, B, n_hidden)  # expect: shape_comment
        logits = self.lm_head(hidden)  # (B, T, vocab_size)
        return logits


model = CharGRU(vocab_size)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
loader = DataLoader(TensorDataset(X, Y), batch_size=16, shuffle=True)

for epoch in range(3):
    for xb, yb in loader:
        logits = model(xb)  # (B, max_len, vocab_size)
        loss = F.cross_entropy(logits.view(-1, vocab_size), yb.view(-1), ignore_index=-1)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"epoch {epoch}: loss {loss.item():.3f}")

with torch.no_grad():
    for _ in range(3):
        out = [0]
        while len(out) < max_len:
            context = torch.tensor([out])  # (1, T)
            logits = model(context)[:, -1, :]  # (1, vocab_size)
            probs = F.softmax(logits, dim=-1)  # (1, vocab_size)
            ix = torch.multinomial(probs, num_samples=1).item()
            if ix == 0:
                break
            out.append(ix)
        print("".join(itos[i] for i in out[1:]))
