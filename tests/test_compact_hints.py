"""Compact hints on a program written like a real one: a model module, a training script
with argparse, an eval pass under no_grad, logging every few steps. Each hint says what the
line is read for (the shape), and dtype, device, grad and counts only where they are news."""

from __future__ import annotations

import asyncio
from pathlib import Path

from shapelens.present.labels import FileHints, HintStyle, RunUsual
from shapelens.present.source_blocks import source_blocks
from shapelens.trace import TracedLine, TracedVar

from conftest import line_of, need, run_cli

MODEL = """
import torch
import torch.nn as nn
from torch.nn import functional as F


class Attention(nn.Module):
    def __init__(self, n_embd, n_head):
        super().__init__()
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.n_head = n_head
        self.n_embd = n_embd

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        att = F.softmax(q @ k.transpose(-2, -1), dim=-1)
        return att


class TinyLM(nn.Module):
    def __init__(self, vocab, n_embd):
        super().__init__()
        self.wte = nn.Embedding(vocab, n_embd)
        self.attn = Attention(n_embd, 2)
        self.head = nn.Linear(n_embd, vocab)

    def forward(self, idx):
        x = self.wte(idx)
        att = self.attn(x)
        logits = self.head(x)
        return logits
"""

MAIN = """
import argparse

import torch
from torch.nn import functional as F
from model import TinyLM

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=6)
args = parser.parse_args()

torch.manual_seed(0)
model = TinyLM(11, 8)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
data = torch.randint(0, 11, (4, 6))
for step in range(args.steps):
    logits = model(data)
    loss = F.cross_entropy(logits.view(-1, 11), data.view(-1))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if step % 3 == 0:
        frozen = logits.detach()
        print(f"step {step}: {loss.item():.3f}")
with torch.no_grad():
    sample = model(data[:1])
"""


def _hints(run_stderr: str, source: Path) -> dict[str, str]:
    """The listing's hint per line of ``source``'s code (keyed by the code, stripped)."""
    code = [line.strip() for line in source.read_text().splitlines() if line.strip()]
    hints = {}
    for row in run_stderr.splitlines():
        text = row.split("│", 1)[1].strip() if "│" in row else ""
        found = [c for c in code if text.startswith(c)]
        if found:
            longest = max(found, key=len)
            hints[longest] = text[len(longest) :].strip()
    return hints


def test_compact_hints_say_what_is_news(script, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    need("torch")
    script(MODEL, "model.py")
    main = script(MAIN)
    run = run_cli("main.py", cwd=tmp_path, timeout=180)
    assert run.returncode == 0, run.stderr
    hints = {**_hints(run.stderr, main), **_hints(run.stderr, main.parent / "model.py")}
    # The loop header says how often its body ran, once; its body's lines say no count.
    assert hints["for step in range(args.steps):"] == "step 0‥5  ×6"
    assert hints["optimizer.zero_grad()"] == ""  # no value: nothing, unless coverage
    # dtype only where not the run's usual float32: the token ids are int64.
    assert hints["data = torch.randint(0, 11, (4, 6))"] == "data (4,6) i64"
    # grad where the line gained it (from the weights), not where it passed through.
    assert hints["logits = model(data)"] == "logits (4,6,11) grad"
    assert hints["loss = F.cross_entropy(logits.view(-1, 11), data.view(-1))"].startswith("loss ")
    assert "grad" not in hints["loss = F.cross_entropy(logits.view(-1, 11), data.view(-1))"]
    # A line under an `if` ran less often than its loop: it says its own count.
    assert hints["frozen = logits.detach()"] == "frozen (4,6,11) no grad  ×2"
    # The def line says how often it was called; equal shapes of one line merge; a forward
    # run in training and under no_grad says nothing about grad.
    assert hints["def forward(self, x):"] == "x (1‥4,6,8)  ×7"
    assert hints["q, k, v = self.c_attn(x).split(self.n_embd, dim=2)"] == "q k v (1‥4,6,8)"
    assert hints["B, T, C = x.size()"] == "B 1‥4  T=6  C=8"
    assert hints["x = self.wte(idx)"] == "x (1‥4,6,8)"
    assert hints["sample = model(data[:1])"] == "sample (1,6,11)"  # no grad, as it read
    # The trace keeps the full truth: the forward's x required grad on some calls only.
    model_py = main.parent / "model.py"
    x = run.var(model_py, line_of(model_py, "x = self.wte(idx)"), "x")
    assert x["grad_varied"] is True and x["requires_grad"] is False
    assert x["shape_hits"] == [6, 1] and x["shapes"] == [[4, 6, 8], [1, 6, 8]]


def test_full_form_and_coverage_are_options(script, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    need("torch")
    script(MODEL, "model.py")
    main = script(MAIN)
    full = _hints(run_cli("--hints", "full", "main.py", cwd=tmp_path, timeout=180).stderr, main)
    assert full["data = torch.randint(0, 11, (4, 6))"] == "data (4,6) i64 cpu"
    assert full["logits = model(data)"] == "logits (4,6,11) f32 cpu grad ×6"
    assert full["optimizer.zero_grad()"] == "×6"  # the full form is coverage too
    covered = _hints(run_cli("--coverage", "main.py", cwd=tmp_path, timeout=180).stderr, main)
    assert covered["optimizer.zero_grad()"] == "×6"
    assert covered["logits = model(data)"] == "logits (4,6,11) grad"


def _var(name: str, **fields: object) -> TracedVar:
    base: dict[str, object] = dict(
        name=name, type="Tensor", shape=(4, 8), dtype="float32", device="cuda:0",
        requires_grad=False, hits=5, shapes=((4, 8),),
    )  # fmt: skip
    base.update(fields)
    return TracedVar(**base)  # type: ignore[arg-type]


SOURCE = """\
def step(x, w):
    h = x @ w
    y = h.cpu()
    for i in range(3):
        h = h + 1
    if x.sum() > 0:
        z = y * 2
    return h
"""


def test_compact_rules_on_a_cuda_run() -> None:
    lines = {
        1: TracedLine(file="a.py", line=1, hits=5, vars=(_var("x"), _var("w", requires_grad=True))),
        2: TracedLine(file="a.py", line=2, hits=5, vars=(_var("h", requires_grad=True),)),
        3: TracedLine(
            file="a.py", line=3, hits=5, vars=(_var("y", device="cpu", requires_grad=True),)
        ),
        4: TracedLine(file="a.py", line=4, hits=20, vars=()),
        5: TracedLine(file="a.py", line=5, hits=15, vars=(_var("h", hits=15, requires_grad=True),)),
        6: TracedLine(file="a.py", line=6, hits=5, vars=()),
        7: TracedLine(file="a.py", line=7, hits=2, vars=(_var("z", hits=2, device="cpu"),)),
    }
    hints = FileHints(lines, SOURCE, RunUsual(dtype="float32", device="cuda:0"))

    def label(n: int, **style: object) -> str:
        return hints.label(lines[n], HintStyle(**style))  # type: ignore[arg-type]

    assert label(1) == "x (4,8)  w (4,8) grad  ×5"  # arguments: nothing read, grad is news
    assert label(2) == "h (4,8)"  # read w (grad): grad is no news; ×5 as its def
    assert label(3) == "y (4,8) cpu"  # the device that is not the run's usual one
    assert label(4) == "×15"  # the loop header: its body ran 15 times (3 per call)
    assert label(5) == "h (4,8)"
    assert label(6) == ""
    assert label(6, coverage=True) == "×5"
    assert label(7) == "z (4,8) cpu no grad  ×2"  # under an if: its own count
    assert label(2, format="full") == "h (4,8) f32 cuda:0 grad ×5"


def test_source_blocks_know_loops_functions_and_reads() -> None:
    blocks = source_blocks(SOURCE)
    assert blocks.opened[1].is_function and blocks.opened[1].counter == 1
    assert blocks.opened[4].counter == 5  # the loop's first plain statement
    assert blocks.block_of(5).header == 4 and blocks.block_of(7).header == 1
    assert blocks.reads[2] == {"x", "w"} and blocks.reads[4] == {"range"}
    assert source_blocks("def broken(:\n").opened == {}  # unparsable: no blocks, no error


async def test_the_hint_format_setting_changes_hints_and_decorations(lsp) -> None:  # type: ignore[no-untyped-def]
    from lsprotocol import types

    need("torch")
    lsp.write("model.py", MODEL)
    path, uri = lsp.write("main.py", MAIN)
    lsp.open(path)
    assert (await lsp.run(uri))["status"] == "ok"
    line = line_of(path, "data = torch.randint") - 1
    assert (await lsp.hints(uri))[line] == "data (4,6) i64"
    compact = lsp.trace_updates[-1]
    assert {e["line"]: e["label"] for e in compact["lines"]}[line] == "data (4,6) i64"
    lsp.client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(settings={"shapelens": {"hintFormat": "full"}})
    )
    for _ in range(100):  # the decorations are sent again, in the full form
        if lsp.trace_updates[-1] is not compact:
            break
        await asyncio.sleep(0.05)
    labels = {e["line"]: e["label"] for e in lsp.trace_updates[-1]["lines"]}
    assert labels[line] == "data (4,6) i64 cpu"
    assert (await lsp.hints(uri))[line] == "data (4,6) i64 cpu"
