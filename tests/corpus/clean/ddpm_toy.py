"""Tiny DDPM on 2-D points: config dataclass, beta schedule, timestep embedding as a (B, 1) * (F,) outer product, ancestral sampling (clean)."""

import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class DiffusionConfig:
    timesteps: int = 50
    beta_start: float = 1e-4
    beta_end: float = 0.05
    emb_dim: int = 16
    hidden: int = 64
    batch_size: int = 128
    train_steps: int = 150
    lr: float = 2e-3
    seed: int = 0


def timestep_embedding(t, dim, max_period=10000):
    half = dim // 2
    freqs = torch.exp(-math.log(max_period) * torch.arange(half, dtype=torch.float32) / half)
    steps = t.float().unsqueeze(-1)  # (B, 1)
    args = steps * freqs  # (B, half): outer product
    return torch.cat([torch.cos(args), torch.sin(args)], dim=-1)


class Denoiser(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.emb_dim = cfg.emb_dim
        self.time_mlp = nn.Sequential(nn.Linear(cfg.emb_dim, cfg.hidden), nn.SiLU())
        self.inp = nn.Linear(2, cfg.hidden)
        self.net = nn.Sequential(nn.SiLU(), nn.Linear(cfg.hidden, cfg.hidden), nn.SiLU(),
                                 nn.Linear(cfg.hidden, 2))

    def forward(self, x, t):
        h = self.inp(x) + self.time_mlp(timestep_embedding(t, self.emb_dim))
        return self.net(h)


def sample_data(n):
    angle = torch.rand(n) * 2 * math.pi
    radius = 1.0 + 0.05 * torch.randn(n)
    return torch.stack([radius * torch.cos(angle), radius * torch.sin(angle)], dim=1)


cfg = DiffusionConfig()
torch.manual_seed(cfg.seed)
betas = torch.linspace(cfg.beta_start, cfg.beta_end, cfg.timesteps)
alphas = 1.0 - betas
alphas_cumprod = torch.cumprod(alphas, dim=0)

model = Denoiser(cfg)
optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.lr)
for step in range(cfg.train_steps):
    x0 = sample_data(cfg.batch_size)
    t = torch.randint(0, cfg.timesteps, (cfg.batch_size,))
    noise = torch.randn_like(x0)
    a_bar = alphas_cumprod[t].view(-1, 1)  # (B, 1)
    x_t = a_bar.sqrt() * x0 + (1 - a_bar).sqrt() * noise
    loss = F.mse_loss(model(x_t, t), noise)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
    if step % 50 == 0:
        print(f"step {step}: loss {loss.item():.4f}")

with torch.no_grad():
    x = torch.randn(256, 2)
    for i in reversed(range(cfg.timesteps)):
        t = torch.full((x.size(0),), i, dtype=torch.long)
        eps = model(x, t)
        coef = betas[i] / (1 - alphas_cumprod[i]).sqrt()
        mean = (x - coef * eps) / alphas[i].sqrt()
        if i > 0:
            x = mean + betas[i].sqrt() * torch.randn_like(x)
        else:
            x = mean
radius = x.norm(dim=1)
print(f"final loss {loss.item():.4f}; sample radius {radius.mean().item():.3f} "
      f"+- {radius.std().item():.3f}")
