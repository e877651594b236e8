"""Character-level language model (makemore-style: embedding, GRU, per-position logits) on a list of names; bug: F.cross_entropy gets targets.view(-1, 1), a (512, 1) column, where the flat (512,) class indices targets.view(-1) were meant."""

import torch
import torch.nn as nn
import torch.nn.functional as F

NAMES = ("emma olivia ava isabella sophia charlotte mia amelia harper evelyn abigail emily "
         "elizabeth mila ella avery sofia camila aria scarlett victoria madison luna grace").split()
BLOCK = 16


class CharGRU(nn.Module):
    def __init__(self, vocab_size, n_embd=24, n_hidden=64):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, n_embd)
        self.gru = nn.GRU(n_embd, n_hidden, batch_first=True)
        self.lm_head = nn.Linear(n_hidden, vocab_size)

    def forward(self, idx):
        h, _ = self.gru(self.embedding(idx))
        return self.lm_head(h)


chars = ["."] + sorted(set("".join(NAMES)))
stoi = {c: i for i, c in enumerate(chars)}
text = torch.tensor([stoi[c] for c in "." + ".".join(NAMES) + "."])
vocab_size = 27

torch.manual_seed(0)
model = CharGRU(vocab_size)
optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
for step in range(20):
    ix = torch.randint(0, len(text) - BLOCK - 1, (32,))
    inputs = torch.stack([text[i : i + BLOCK] for i in ix])
    targets = torch.stack([text[i + 1 : i + 1 + BLOCK] for i in ix])
    logits = model(inputs)
    loss = F.cross_entropy(logits.view(-1, vocab_size), targets.view(-1, 1))  # expect: shape_mismatch
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
    if step % 5 == 0:
        print(f"step {step}: loss {loss.item():.4f}")
