"""Hints that say something: a clock's readings show no range and no course, a range never
prints two equal ends, and hover says a finding's kind once."""

from __future__ import annotations

import re
from pathlib import Path

from test_hint_labels import listing_hint

from shapelens.present.labels import DEFAULT_STYLE, FileHints, HintStyle, RunUsual
from shapelens.present.markdown import var_table
from shapelens.present.shapes import number_range_text
from shapelens.trace import TracedLine, TracedVar

from conftest import line_of, need, run_cli

TRAIN = """
import math
import time

import torch
import torch.nn as nn
from torch.nn import functional as F

learning_rate, min_lr = 6e-4, 6e-5
warmup_iters, lr_decay_iters = 0, 5000


def get_lr(it):
    if it < warmup_iters:
        return learning_rate * (it + 1) / (warmup_iters + 1)
    decay_ratio = (it - warmup_iters) / (lr_decay_iters - warmup_iters)
    coeff = 0.5 * (1.0 + math.cos(math.pi * decay_ratio))
    return min_lr + coeff * (learning_rate - min_lr)


torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 1))
optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate)
x, y = torch.randn(64, 8), torch.randn(64, 1)
start = time.perf_counter()
for it in range(6):
    t0 = time.time()
    lr = get_lr(it)
    for param_group in optimizer.param_groups:
        param_group["lr"] = lr
    loss = F.mse_loss(model(x), y)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
    dt = time.time() - t0
    elapsed = time.perf_counter() - start
    print(f"iter {it}: loss {loss.item():.4f}, lr {lr:.6f}, time {dt * 1000:.2f}ms")
"""

COURSE = r"[▁▂▃▄▅▆▇█]{6}"


def test_a_training_loops_clock_readings_show_no_range_or_course(script, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    need("torch")
    script(TRAIN)
    run = run_cli("main.py", cwd=tmp_path, timeout=180)
    assert run.returncode == 0, run.stderr
    listing = run.stderr
    # Readings of a clock: when each step began. Not `t0 1.796e+09‥1.796e+09 ▁▂▃▅▆▇`.
    assert listing_hint(listing, "t0 = time.time()") == "", listing
    assert listing_hint(listing, "start = time.perf_counter()") == ""  # not start=1.23e+04
    # Durations: how long a step took (the first one is often slow) and the run so far.
    assert re.fullmatch(rf"dt \S+‥\S+ {COURSE}", listing_hint(listing, "dt = time.time() - t0"))
    elapsed = listing_hint(listing, "elapsed = time.perf_counter() - start")
    assert re.fullmatch(rf"elapsed \S+‥\S+ {COURSE}", elapsed), elapsed  # grows: no clock
    # A cosine schedule 6 steps into 5000 moves in its 6th digit: not `lr 0.0006‥0.0006`.
    assert listing_hint(listing, "lr = get_lr(it)") == "lr 0.000599999‥0.0006 ██▇▅▄▁", listing
    main = tmp_path / "main.py"
    t0 = run.var(main, line_of(main, "t0 = time.time()"), "t0")
    assert t0["number"][1] < t0["number"][2]  # the trace keeps every reading's range


def _number(name: str, values: list[float]) -> TracedVar:
    return TracedVar(
        name=name, type="float", shape=None, dtype=None, device=None, requires_grad=None,
        hits=len(values), shapes=(), number=(values[-1], min(values), max(values)),
        history=tuple(values),
    )  # fmt: skip


LOOP = """\
for it in range(6):
    t1 = time.time()
    dt = t1 - t0
    t0 = t1
    lr = learning_rate * it / warmup_iters
    stamp = record["timestamp"]
"""


def test_clock_readings_are_told_from_growing_floats() -> None:
    epoch = [1.796e9 + 0.05 * i for i in range(6)]
    shuffled = [1.796e9 + s for s in (5.0, 1.0, 3.0, 0.0, 2.0, 4.0)]
    values = {2: ("t1", epoch), 3: ("dt", [0.05] * 5 + [0.06]), 4: ("t0", epoch),
              5: ("lr", [i / 10 for i in range(6)]), 6: ("stamp", shuffled)}  # fmt: skip
    lines = {
        n: TracedLine(file="a.py", line=n, hits=6, vars=(_number(name, history),))
        for n, (name, history) in values.items()
    }
    hints = FileHints(lines, LOOP, RunUsual())

    def label(line: int, style: HintStyle = DEFAULT_STYLE) -> str:
        return hints.label(lines[line], style)

    assert label(2) == ""  # its statement calls a clock
    assert label(4) == ""  # `t0 = t1`: epoch seconds that only grew
    assert label(4, HintStyle(format="full")) == "t0 clock ×6"
    assert label(3) == "dt 0.05‥0.06 ▁▁▁▁▁█"
    assert label(5) == "lr 0.0‥0.5 ▁▂▄▅▇█"  # a warmup only grows too: not a date
    assert label(6) == "stamp 1796000000.0‥1796000005.0 █▂▅▁▄▇"  # dates, not read in order


def test_a_range_never_prints_two_equal_ends() -> None:
    assert number_range_text(0.0006, 0.000599999) == "0.0006‥0.000599999"
    assert number_range_text(1.0, 1.0000001) == "1.0‥1.0000001"
    assert number_range_text(2.5, 2.5) == "2.5"
    assert number_range_text(0.5, 0.25) == "0.5‥0.25"
    assert number_range_text(False, True) == "False‥True"
    lr = _number("lr", [0.0006, 0.0005999976, 0.000599999])
    table = var_table(lr)
    assert "| min | `0.000599998` |" in table and "| max | `0.0006` |" in table, table
    assert "| min ‥ max | `0.000599998 ‥ 0.0006` |" in table, table


ATTENTION = """\
def forward(self, x):
    B, T, C = x.size()
    k = self.key(x).view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
"""


def test_the_full_form_names_dims_too() -> None:
    k = TracedVar(
        name="k", type="Tensor", shape=(2, 4, 8, 4), dtype="float32", device="cpu",
        requires_grad=True, hits=3, shapes=((2, 4, 8, 4),),
    )  # fmt: skip
    called = TracedLine(file="a.py", line=1, hits=3, vars=())  # the def: ×3 said there
    lines = {1: called, 3: TracedLine(file="a.py", line=3, hits=3, vars=(k,))}
    hints = FileHints(lines, ATTENTION, RunUsual(dtype="float32", device="cpu"))
    full = HintStyle(format="full", dim_names="both")
    assert hints.label(lines[3], full) == "k (B=2,n_head=4,T=8,4) f32 cpu grad ×3"
    assert hints.label(lines[3], HintStyle(dim_names="names")) == "k (B,n_head,T,4) grad"
    assert hints.label(lines[3]) == "k (2,4,8,4) grad"


REGRESSION = """
import torch
import torch.nn as nn

torch.manual_seed(0)
model = nn.Linear(3, 1)
x, y = torch.randn(4, 3), torch.randn(4)
pred = model(x)
loss = ((pred - y) ** 2).mean()
"""


async def test_hover_says_a_findings_kind_once(lsp) -> None:  # type: ignore[no-untyped-def]
    from lsprotocol import types

    need("torch")
    path, uri = lsp.write("main.py", REGRESSION)
    lsp.open(path)
    assert (await lsp.run(uri))["status"] == "ok"
    line = line_of(path, "loss =") - 1
    hover = await lsp.client.text_document_hover_async(
        types.HoverParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            position=types.Position(line, 1),
        )
    )
    assert hover is not None
    text = hover.contents.value  # type: ignore[union-attr]
    finding = f"⚠ **broadcast** (line {line + 1}): `pred` (4, 1) - `y` (4,) → (4, 4);"
    assert finding in text, text
    assert "broadcast: " not in text
