"""Small GPT on a copy task (main.py + model.py); bug in model.py: .view(B, T, C) on the transposed, non-contiguous attention output raises."""

import torch
from model import GPT, Config

torch.manual_seed(0)
config = Config()
model = GPT(config)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)


def get_batch(batch_size=8):
    # the second half of each sequence repeats the first half
    half = torch.randint(0, config.vocab_size, (batch_size, config.block_size // 2 + 1))
    seq = torch.cat([half, half], dim=1)[:, : config.block_size + 1]
    return seq[:, :-1], seq[:, 1:]


for step in range(20):
    x, y = get_batch()
    logits, loss = model(x, y)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
    if step % 5 == 0:
        print(f"step {step}: loss {loss.item():.4f}")
