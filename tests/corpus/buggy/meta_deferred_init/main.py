"""Llama-style model built on meta, then to_empty('cpu') (main.py + model.py); bug in model.py: the rotary tables are plain attributes and stay on meta."""

import torch
import torch.nn.functional as F
from model import ModelArgs, Transformer

torch.manual_seed(0)
args = ModelArgs()

# no memory is allocated for the parameters while the model is built
with torch.device("meta"):
    model = Transformer(args)
model.to_empty(device="cpu")
model.init_weights()
print(f"{sum(p.numel() for p in model.parameters())} parameters on "
      f"{next(model.parameters()).device}")

optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
for step in range(10):
    tokens = torch.randint(0, args.vocab_size, (4, args.max_seq_len + 1))
    tokens[:, 1::2] = tokens[:, 0:-1:2]  # every odd token repeats the previous one
    logits = model(tokens[:, :-1])
    loss = F.cross_entropy(logits.reshape(-1, args.vocab_size), tokens[:, 1:].reshape(-1))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step}: loss {loss.item():.4f}")
