"""A small Trainer with an L1 objective; the bug is in train_step."""

import torch


class Trainer:
    def __init__(self, model, lr=1e-2, clip=1.0):
        self.model = model
        self.clip = clip
        self.optimizer = torch.optim.Adam(model.parameters(), lr=lr)
        self.history = []

    def train_step(self, batch):
        self.model.train()
        out = self.model(batch.x)  # (B, 1)
        loss = (out - batch.y).abs().sum() / len(batch.y)  # expect: broadcast
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.clip)
        self.optimizer.step()
        self.history.append(loss.item())
        return loss.item()

    @torch.no_grad()
    def evaluate(self, x, y):
        self.model.eval()
        pred = self.model(x).squeeze(-1)
        return (pred - y).abs().mean().item()
