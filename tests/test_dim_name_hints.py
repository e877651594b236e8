"""Named dims in hints, on request (``--dim-names``, ``shapelens.dimNames``): a GPT block
written like nanoGPT's, its shapes named after the variables that built them.

``off`` (the default) keeps sizes; ``names`` writes ``k (B,n_head,T,4)``; ``both`` writes
``k (B=1‥2,n_head=4,T=3‥8,4)``. A dim no variable built (a literal, ``C // n_head``) keeps
its size."""

from __future__ import annotations

import asyncio
from pathlib import Path

from test_hint_labels import listing_hint

from conftest import line_of, need, run_cli

MODEL = """
import math
from dataclasses import dataclass

import torch
import torch.nn as nn
from torch.nn import functional as F


@dataclass
class GPTConfig:
    block_size: int = 8
    vocab_size: int = 32
    n_head: int = 4
    n_embd: int = 16


class CausalSelfAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd)
        self.c_proj = nn.Linear(config.n_embd, config.n_embd)
        self.n_head = config.n_head
        self.n_embd = config.n_embd
        mask = torch.tril(torch.ones(config.block_size, config.block_size))
        self.register_buffer("bias", mask.view(1, 1, config.block_size, config.block_size))

    def forward(self, x):
        B, T, C = x.size()  # batch size, sequence length, embedding dimensionality (n_embd)
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = att @ v  # (B, nh, T, T) x (B, nh, T, hs) -> (B, nh, T, hs)
        y = y.transpose(1, 2).contiguous().view(B, T, C)  # re-assemble all head outputs
        return self.c_proj(y)


class TinyGPT(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.wte = nn.Embedding(config.vocab_size, config.n_embd)
        self.wpe = nn.Embedding(config.block_size, config.n_embd)
        self.attn = CausalSelfAttention(config)
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)

    def forward(self, idx, targets=None):
        b, t = idx.size()
        pos = torch.arange(0, t, dtype=torch.long, device=idx.device)  # shape (t)
        x = self.wte(idx) + self.wpe(pos)
        x = x + self.attn(x)
        logits = self.lm_head(x)
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
        return logits, loss

    @torch.no_grad()
    def generate(self, idx, max_new_tokens):
        for _ in range(max_new_tokens):
            logits, _ = self(idx[:, -self.config.block_size :])
            probs = F.softmax(logits[:, -1, :], dim=-1)
            idx_next = torch.multinomial(probs, num_samples=1)
            idx = torch.cat((idx, idx_next), dim=1)
        return idx
"""

TRAIN = """
import torch
from model import GPTConfig, TinyGPT

torch.manual_seed(1337)
config = GPTConfig()
model = TinyGPT(config)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
data = torch.randint(0, config.vocab_size, (64,))
for step in range(3):
    ix = torch.randint(len(data) - config.block_size - 1, (2,))
    xb = torch.stack([data[i : i + config.block_size] for i in ix])
    yb = torch.stack([data[i + 1 : i + 1 + config.block_size] for i in ix])
    logits, loss = model(xb, yb)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
print(model.generate(torch.zeros((1, 3), dtype=torch.long), max_new_tokens=2))
"""


# Trained on (2, 8) batches, then sampled from a (1, 3) prompt: B is 1‥2 and T 3‥8.
KEYS = "k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)"
HEADS = "y = y.transpose(1, 2).contiguous().view(B, T, C)  # re-assemble all head outputs"
ATTENDED = "y = att @ v  # (B, nh, T, T) x (B, nh, T, hs) -> (B, nh, T, hs)"


def test_the_listing_names_dims_on_request(script, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    need("torch")
    script(MODEL, "model.py")
    script(TRAIN, "train.py")
    sizes = run_cli("train.py", cwd=tmp_path, timeout=180)
    assert sizes.returncode == 0, sizes.stderr
    assert listing_hint(sizes.stderr, KEYS) == "k (1‥2,4,3‥8,4)"  # off: the default
    both = run_cli("--dim-names", "both", "train.py", cwd=tmp_path, timeout=180)
    assert both.returncode == 0, both.stderr
    # B and T from x.size(), n_head from self.n_head; C // n_head is its size
    assert listing_hint(both.stderr, KEYS) == "k (B=1‥2,n_head=4,T=3‥8,4)", both.stderr
    assert listing_hint(both.stderr, HEADS) == "y (B=1‥2,T=3‥8,C=16)"
    # A shape no statement named keeps its sizes; so do numbers.
    assert listing_hint(both.stderr, ATTENDED) == "y (1‥2,4,3‥8,4)"
    assert listing_hint(both.stderr, "b, t = idx.size()") == "b 1‥2  t 3‥8"
    names = run_cli("--dim-names", "names", "train.py", cwd=tmp_path, timeout=180)
    assert listing_hint(names.stderr, KEYS) == "k (B,n_head,T,4)", names.stderr
    assert listing_hint(names.stderr, HEADS) == "y (B,T,C)"


async def test_inlay_hints_and_decorations_follow_the_dim_names_setting(lsp) -> None:  # type: ignore[no-untyped-def]
    from lsprotocol import types

    need("torch")
    model, model_uri = lsp.write("model.py", MODEL)
    train, train_uri = lsp.write("train.py", TRAIN)
    lsp.open(model)
    lsp.open(train)
    assert (await lsp.run(train_uri))["status"] == "ok"
    keys = line_of(model, "k = k.view") - 1
    assert (await lsp.hints(model_uri))[keys] == "k (1‥2,4,3‥8,4)"
    sent = len(lsp.trace_updates)
    lsp.client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(settings={"shapelens": {"dimNames": "names"}})
    )
    for _ in range(100):  # the decorations of each open document are sent again, named
        if any(u["uri"] == model_uri for u in lsp.trace_updates[sent:]):
            break
        await asyncio.sleep(0.05)
    update = next(u for u in lsp.trace_updates[sent:] if u["uri"] == model_uri)
    assert {e["line"]: e["label"] for e in update["lines"]}[keys] == "k (B,n_head,T,4)"
    assert (await lsp.hints(model_uri))[keys] == "k (B,n_head,T,4)"
    lsp.client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(settings={"shapelens": {"dimNames": "both"}})
    )
    heads = line_of(model, "y = y.transpose") - 1
    for _ in range(100):
        if (await lsp.hints(model_uri))[heads] != "y (B,T,C)":
            break
        await asyncio.sleep(0.05)
    assert (await lsp.hints(model_uri))[heads] == "y (B=1‥2,T=3‥8,C=16)"
