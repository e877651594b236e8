"""A char-level LSTM language model: one AdamW step (memory accuracy bench)."""

import torch
import torch.nn as nn


class CharLSTM(nn.Module):
    def __init__(self, vocab=96, width=256):
        super().__init__()
        self.embed = nn.Embedding(vocab, 64)
        self.lstm = nn.LSTM(64, width, num_layers=2, batch_first=True)
        self.out = nn.Linear(width, vocab)

    def forward(self, chars):
        hidden, _ = self.lstm(self.embed(chars))
        return self.out(hidden)


model = CharLSTM()
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
chars = torch.randint(0, 96, (16, 101))
logits = model(chars[:, :-1])
loss = nn.functional.cross_entropy(logits.reshape(-1, 96), chars[:, 1:].reshape(-1))
loss.backward()
opt.step()
opt.zero_grad(set_to_none=True)
