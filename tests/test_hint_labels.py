"""Hint labels of shapes that vary: every varying dim as its range, over every shape read."""

from __future__ import annotations

from pathlib import Path

import pytest

from shapelens.present.labels import var_label
from shapelens.present.markdown import var_table
from shapelens.trace import TracedVar, trace_from_json

from conftest import line_of, lines_switch_off, need, run_cli

pytestmark = pytest.mark.backend

GROWING = """
import numpy as np

def attend(x):
    t = x.shape[1]
    att = np.zeros((8, 3, t, t))
    return att

lengths = [2, 3, 1, 5, 4, 6, 7, 8, 9, 10, 11, 12]  # T=1 between others, then past 8 distinct
for t in lengths:
    x = np.zeros((2, t, 6))
    att = attend(x)
flat = np.zeros(4)
for step in range(3):
    flat = flat.reshape(2, 2) if step == 1 else np.zeros(4)
"""


def test_varying_dims_show_as_ranges_in_the_listing_and_the_trace(script, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    main = script(GROWING)
    run = run_cli("main.py", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    x = run.var(main, line_of(main, "x = np.zeros"), "x")
    assert len(x["shapes"]) == 8  # the first 8 distinct shapes ...
    assert x["dim_ranges"] == [[2, 2], [1, 12], [6, 6]]  # ... the ranges count all 12
    att = run.var(main, line_of(main, "att = np.zeros"), "att")
    assert att["dim_ranges"] == [[8, 8], [3, 3], [1, 12], [1, 12]]
    flat = run.var(main, line_of(main, "flat = flat.reshape"), "flat")
    assert "dim_ranges" not in flat  # its number of dims varied
    constant = run.var(main, line_of(main, "flat = np.zeros(4)"), "flat")
    assert "dim_ranges" not in constant
    listing = run.stderr  # compact: float64 is this run's usual dtype, the loop says ×12
    assert listing_hint(listing, "x = np.zeros((2, t, 6))") == "x (2,1‥12,6)", listing
    assert listing_hint(listing, "att = attend(x)") == "att (8,3,1‥12,1‥12)", listing
    # not "(4,)…(4,)": it varied
    assert (
        listing_hint(listing, "flat = flat.reshape(2, 2) if step == 1 else np.zeros(4)")
        == "flat (4,)|(2,2)"
    ), listing
    assert listing_hint(listing, "for t in lengths:") == "t 1‥12  ×12", listing


def listing_hint(listing: str, code: str) -> str:
    """The listing's hint for the line whose code starts with ``code``."""
    rows = [line.split("│", 1)[1].strip() for line in listing.splitlines() if "│" in line]
    row = next(r for r in rows if r.startswith(code))
    return row[len(code) :].strip()


def _var(**fields: object) -> TracedVar:
    base: dict[str, object] = dict(
        name="x", type="torch.Tensor", shape=(2, 5, 6), dtype="float32", device="cpu",
        requires_grad=False, hits=4, shapes=((2, 2, 6), (2, 1, 6), (2, 5, 6)),
    )  # fmt: skip
    base.update(fields)
    return TracedVar(**base)  # type: ignore[arg-type]


def test_label_and_hover_of_a_varying_shape() -> None:
    ranged = _var(dim_ranges=((2, 2), (1, 5), (6, 6)))
    assert var_label(ranged) == "x (2,1‥5,6) f32 cpu ×4"
    hover = var_table(ranged)
    assert "| last shape | `(2,5,6)` |" in hover
    assert "| dims | `(2,1‥5,6)` |" in hover
    assert "| shapes seen | `(2,2,6), (2,1,6), (2,5,6)` |" in hover  # an older trace: no counts
    counted = var_table(_var(shape_hits=(1, 1, 2), grad_varied=True))
    assert "| shapes seen | `(2,2,6) ×1, (2,1,6) ×1, (2,5,6) ×2` |" in counted
    assert "| requires_grad | `True on some hits, False on others (last: False)` |" in counted
    # Without ranges (dims that varied in number, or an older trace): the distinct shapes.
    assert var_label(_var()) == "x (2,2,6)|(2,1,6)|(2,5,6) f32 cpu ×4"
    assert var_label(_var(shapes=((1,), (1, 2), (1, 2, 3), (4,)))) == (
        "x (1,)|(1,2)|(1,2,3)|… f32 cpu ×4"
    )
    constant = _var(shape=(8, 3), shapes=((8, 3),), dim_ranges=((8, 8), (3, 3)))
    assert var_label(constant) == "x (8,3) f32 cpu ×4"


NUMBERS = """
import numpy as np

x = np.zeros((4, 64, 32))
B, T, C = x.shape
lr = 0.001
best = float("inf")
total = 0.0
for i in range(1000):
    total += i * 0.5
    done = i > 500
pair = (np.zeros(3), 7)
for _ in range(3):
    pass
"""


def test_numbers_show_their_value_or_their_range(script, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    main = script(NUMBERS)
    run = run_cli("main.py", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    rows = [line.split("│", 1)[1] for line in run.stderr.splitlines() if "│" in line]

    def hint(code: str) -> str:
        """The listing's hint for the line whose code starts with ``code``."""
        row = next(r.strip() for r in rows if r.strip().startswith(code))
        return " ".join(row[len(code) :].split())

    assert hint("B, T, C = x.shape") == "B=4 T=64 C=32"
    assert hint("lr = 0.001") == "lr=0.001"
    assert hint('best = float("inf")') == "best=inf"  # a Python inf is never a finding
    assert hint("total = 0.0") == "total=0.0"
    estimated = "+" if lines_switch_off() else ""
    # the loop's count, said once (where lines switch off, its body's first line is: estimated)
    if estimated:
        assert hint("for i in range(1000):").startswith("i 0‥999 ×")
        assert hint("for i in range(1000):").endswith("+")
    else:
        assert hint("for i in range(1000):") == "i 0‥999 ×1000"
    if lines_switch_off():
        # Switched off once stable (sampled, ×N+): the range is over the values read before
        # that and at re-arms (every 0.2 s; this loop is shorter), not the whole loop.
        assert hint("total += i * 0.5").startswith("total 0.0‥")
        assert "×" not in hint("total += i * 0.5")  # as often as its loop (estimated)
    else:
        assert hint("total += i * 0.5").startswith("total 0.0‥2.4")  # 2.4975e5 at most
    # Constant for its first 500 hits: switched off (an estimated count) where lines are, and its
    # last value read when the frame ended.
    assert hint("done = i > 500") == "done False‥True"
    assert hint("pair = (np.zeros(3), 7)") == "pair[0] (3,)"  # no pair[1]=7
    assert hint("for _ in range(3):") == "×3"  # the throwaway name shows nothing
    assert run.trace is not None and run.trace["findings"] == []
    # A hot line's numbers are read as its shapes are: densely at first, then 1 hit in 13
    # (the last value at the frame's end when only this line stores the name).
    total = run.var(main, line_of(main, "total +="), "total")
    assert total["number"][1] == 0.0 and total["number"][2] <= 249_750
    if not lines_switch_off():
        assert total["number"][2] >= 240_000
    counter = run.var(main, line_of(main, "for i in"), "i")
    assert counter["number"] == [999, 0, 999]  # the loop's last value, read when it ended


def test_hover_of_a_number() -> None:
    step = _var(
        name="step", type="int", shape=None, dtype=None, device=None, requires_grad=None,
        hits=10, shapes=(), number=(9, 0, 9),
    )  # fmt: skip
    assert var_label(step) == "step 0‥9 ×10"
    hover = var_table(step)
    assert "| last | `9` |" in hover and "| min | `0` |" in hover and "| max | `9` |" in hover
    assert "shape" not in hover


STORES = """
import torch
import torch.nn as nn

class LayerNorm(nn.Module):
    def __init__(self, ndim):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(ndim))

class PositionalEncoding(nn.Module):
    def __init__(self, d_model, max_len=50):
        super().__init__()
        pe = torch.zeros(max_len, d_model)
        position = torch.arange(0, max_len, dtype=torch.float).unsqueeze(1)
        pe[:, 0::2] = torch.sin(position * torch.ones(d_model // 2))
        self.pe = pe
        mask = torch.full((4, 4), float("-inf")).triu(1)
        self.src_mask = mask

ln = LayerNorm(64)
enc = PositionalEncoding(16)
logits = torch.randn(2, 10)
v, _ = torch.topk(logits, 3)
logits[logits < v[:, [-1]]] = -float("Inf")
batch = {}
batch["x"] = torch.zeros(3, 2)
"""


def test_attribute_and_subscript_stores_show_what_they_hold(script, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    need("torch")
    main = script(STORES)
    run = run_cli("main.py", cwd=tmp_path)
    assert run.returncode == 0, run.stderr

    def shown(code: str, name: str) -> tuple[object, ...]:
        var = run.var(main, line_of(main, code), name)
        return tuple(var["shape"]), var["dtype"], var["requires_grad"]

    assert shown("self.weight =", "self.weight") == ((64,), "float32", True)
    assert shown("pe[:, 0::2] =", "pe") == ((50, 16), "float32", False)  # after the store
    assert shown("self.pe = pe", "self.pe") == ((50, 16), "float32", False)
    assert shown("self.src_mask = mask", "self.src_mask") == ((4, 4), "float32", False)
    assert shown('batch["x"] =', "batch['x']") == ((3, 2), "float32", False)
    assert (
        listing_hint(run.stderr, "self.weight = nn.Parameter(torch.ones(ndim))")
        == "self.weight (64,) grad"
    )
    # Top-k sampling's -inf, stored into an item, is on purpose: no NaN/Inf finding.
    assert shown("logits[logits <", "logits") == ((2, 10), "float32", False)
    assert run.trace is not None and run.trace["findings"] == []


COURSE = """
import torch

w = torch.tensor(4.0, requires_grad=True)
running = 0.0
for step in range(500):
    loss = (w - 1.0) ** 2 + 1.5  # stalls near 1.5, as the seed's example 2
    loss.backward()
    with torch.no_grad():
        w -= 0.01 * w.grad
        w.grad.zero_()
    running = 0.9 * running + 0.1 * loss.item()
ghost = torch.zeros((), device="meta")
"""


def test_scalars_show_their_course_as_a_sparkline(script, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    need("torch")
    main = script(COURSE)
    run = run_cli("main.py", cwd=tmp_path, timeout=180)
    assert run.returncode == 0, run.stderr
    loss = run.var(main, line_of(main, "loss = (w - 1.0)"), "loss")
    history = loss["history"]
    assert 2 <= len(history) <= 32  # constant memory over 500 steps
    assert history[0] == pytest.approx(10.5) and history[-1] < history[0]
    assert history == sorted(history, reverse=True)  # the course, in order
    line = next(row for row in run.stderr.splitlines() if "loss = (w - 1.0)" in row)
    # The latest value is the last one (read when the frame ends, also where the stable line
    # is switched off and its course comes from its first hits and re-arms).
    # Compact: it read `w`, which requires grad, and ran as often as its loop: no more said.
    if lines_switch_off():
        assert " loss 1.5 " in line and "grad" not in line and "×" not in line, line
    else:
        assert line.endswith("loss 1.5 ▆▂▁▁▁▁▁▁"), line  # stalls near 1.5
    estimated = "+" if lines_switch_off() else ""  # its first body line: switched off
    assert listing_hint(run.stderr, "for step in range(500):") == f"step 0‥499  ×500{estimated}"
    running = run.var(main, line_of(main, "running = 0.9"), "running")
    assert len(running["history"]) >= 2
    ghost = run.var(main, line_of(main, "ghost ="), "ghost")
    assert "history" not in ghost  # a tensor off the CPU is never read
    # Asked to read GPU scalars, a meta tensor still has no value to read: nothing breaks.
    asked = run_cli("--quiet", "--scalars-on-gpu", "main.py", cwd=tmp_path, timeout=180)
    assert asked.returncode == 0, asked.stderr
    assert "history" not in asked.var(main, line_of(main, "ghost ="), "ghost")
    assert len(asked.var(main, line_of(main, "loss = (w - 1.0)"), "loss")["history"]) >= 2


def test_hover_of_a_course() -> None:
    loss = _var(
        name="loss", shape=(), shapes=((),), hits=10, requires_grad=True,
        history=(25.8, 13.4, 7.6, 4.9, 3.6, 2.9, 2.6, 2.4, 2.3, 2.2),
    )  # fmt: skip
    assert var_label(loss) == "loss 2.2 █▄▃▂▁▁▁▁ f32 cpu grad ×10"
    hover = var_table(loss)
    assert "| course | `█▄▃▂▁▁▁▁▁▁` |" in hover
    assert "| first → last | `25.8 → 2.2` |" in hover and "| min ‥ max | `2.2 ‥ 25.8` |" in hover


LABELS = """
import torch

labels = torch.tensor([3, 1, 4, 1, 5, 9, 2, 6])
for index in range(8):
    label = labels[index]
    above = label > 2
"""


def test_an_integer_or_bool_scalar_shows_its_value_as_one(script, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A Dataset's class label (a 0-dim i64 tensor) is ``6``, not ``6.0``."""
    need("torch")
    main = script(LABELS)
    run = run_cli("main.py", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert listing_hint(run.stderr, "label = labels[index]").startswith("label 6 "), run.stderr
    assert listing_hint(run.stderr, "above = label > 2").startswith("above True "), run.stderr
    trace = trace_from_json(run.trace)
    (traced,) = (t for t in trace.lines if t.line == line_of(main, "label = labels[index]"))
    label = next(var for var in traced.vars if var.name == "label")
    assert "| first → last | `3 → 6` |" in var_table(label)
    assert "| min ‥ max | `1 ‥ 9` |" in var_table(label)


ATTENTION = """
import torch

n_head = 4
for T in (3, 8):
    x = torch.zeros(2, T, 16)
    B, T, C = x.size()
    k = x.view(B, T, n_head, C // n_head).transpose(1, 2)
"""


async def test_hover_names_each_dim_after_the_names_it_came_from(lsp) -> None:  # type: ignore[no-untyped-def]
    from lsprotocol import types

    need("torch")
    path, uri = lsp.write("attention.py", ATTENTION)
    lsp.open(path)
    assert (await lsp.run(uri))["status"] == "ok"
    line = line_of(path, "k = x.view") - 1
    hover = await lsp.client.text_document_hover_async(
        types.HoverParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            position=types.Position(line, 4),
        )
    )
    assert hover is not None
    text = hover.contents.value  # type: ignore[union-attr]
    # transpose(1, 2) moved n_head before T; the range of T spans both runs of the loop
    assert "| dims | `(B=2, n_head=4, T=3‥8, C // n_head=4)` |" in text, text
    assert (await lsp.hints(uri))[line] == "k (2,4,3‥8,4)"


def test_dim_names_follow_views_transposes_and_permutes() -> None:
    from shapelens.present.dim_names import dim_names

    statement = "q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)"
    assert dim_names(statement, "q", 4) == ("B", "n_head", "T", "C // n_head")
    assert dim_names("x = torch.zeros((B, T), dtype=torch.long)", "x", 2) == ("B", "T")
    assert dim_names("y = att.reshape(B, -1, C).permute(0, 2, 1)", "y", 3) == ("B", "C", None)
    assert dim_names("y = att.view(B, T, C)", "y", 2) is None  # the count does not match
    assert dim_names("y = model(x)", "y", 2) is None
    assert dim_names("x = torch.zeros(4, 3)", "x", 2) is None  # literals name nothing
