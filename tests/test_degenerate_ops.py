"""``degenerate_op``: torch calls that run and do nothing useful (a softmax over one logit,
a reduction that reduces nothing, a squeeze that also drops a batch of one), found in real
training loops, and never on the ordinary code around them."""

from __future__ import annotations

from pathlib import Path

import pytest
from lsprotocol import types

from conftest import LspSession, line_of, need, run_cli

need("torch")

_DATA = """
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
X = torch.randn({n}, 4)
y = (X.sum(1) > 0).float()
loader = DataLoader(TensorDataset(X, y), batch_size=8)
model = nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
"""


@pytest.mark.backend
def test_log_softmax_over_one_logit_is_flagged(script, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A binary classifier with one logit and a log_softmax over the classes: every log
    probability is 0, the loss is constant and training never moves."""
    main = script(
        _DATA.format(n=64)
        + """
for epoch in range(2):
    for xb, yb in loader:
        logits = model(xb)
        logp = F.log_softmax(logits, dim=1)
        probs = logits.softmax(-1)
        implicit = F.softmax(logits)
        loss = -(logp.squeeze(1) * yb).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
"""
    )
    run = run_cli("--quiet", "main.py", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    found = {f["line"]: f for f in run.findings("degenerate_op")}
    assert sorted(found) == [line_of(main, "logp ="), line_of(main, "probs =")]
    logp = found[line_of(main, "logp =")]
    assert logp["severity"] == "warning" and logp["op"] == "F.log_softmax"
    assert logp["expression"] == "logp = F.log_softmax(logits, dim=1)"
    [operand] = logp["operands"]
    assert (operand["name"], operand["shape"], operand["dtype"], operand["device"]) == (
        "logits",
        [8, 1],
        "float32",
        "cpu",
    )
    assert operand["line"] == line_of(main, "logits = model(xb)")
    assert logp["message"].startswith(
        "degenerate op: F.log_softmax of `logits` (8, 1) float32 cpu; over dim 1, of size 1, "
        "it is 0 everywhere"
    )
    assert logp["related"][0]["line"] == line_of(main, "logits = model(xb)")
    probs = found[line_of(main, "probs =")]  # a negative dim, a method
    assert probs["op"] == "Tensor.softmax" and "1 everywhere" in probs["advice"]
    # no dim: torch's own warning says so, and it is not reported twice
    [implicit] = run.findings("library_warning")
    assert implicit["line"] == line_of(main, "implicit =")


@pytest.mark.backend
def test_a_squeeze_that_drops_the_last_batch_of_one(script, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """65 samples in batches of 8 (drop_last=False): the 9th batch has one sample, and
    `.squeeze()` turns its (1, 1) prediction into a 0-dim tensor. The op watch follows the
    statements right after a read saw a new shape (the batch of one, read at the loop
    header), so it sees the squeeze there; the recorded ranks of `pred` would tell too."""
    main = script(
        _DATA.format(n=65)
        + """
small = DataLoader(TensorDataset(X[:9], y[:9]), batch_size=8)
for epoch in range(3):
    for xb, yb in loader:
        pred = model(xb).squeeze()
        loss = F.mse_loss(pred, yb)
        opt.zero_grad()
        loss.backward()
        opt.step()
for xb, yb in small:
    check = F.mse_loss(torch.squeeze(model(xb)), yb)
"""
    )
    run = run_cli("--quiet", "main.py", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    found = {f["line"]: f for f in run.findings("degenerate_op")}
    named, inline = line_of(main, "pred = model"), line_of(main, "check =")
    assert sorted(found) == [named, inline]
    assert found[named]["op"] == "Tensor.squeeze"
    assert "(8, 1) → (8,) on an earlier hit, (1, 1) → () here" in found[named]["advice"]
    assert found[named]["operands"][0]["name"] == "model(xb)"
    assert found[inline]["op"] == "torch.squeeze"
    [operand] = found[inline]["operands"]
    assert (operand["name"], operand["shape"]) == ("model(xb)", [1, 1])
    assert "(8, 1) → (8,) on an earlier hit, (1, 1) → () here" in found[inline]["advice"]
    assert "`.squeeze(1)`" in found[inline]["advice"]


@pytest.mark.backend
def test_a_reduction_that_reduces_nothing(script, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A baseline subtracted over the action dim of (B, 1) values: the mean over a dim of
    size 1 is the value itself, and the advantage is always 0."""
    main = script(
        _DATA.format(n=64)
        + """
for epoch in range(2):
    for xb, yb in loader:
        values = model(xb)
        advantage = values - values.mean(dim=1, keepdim=True)
        spread = torch.std(values, dim=-1, keepdim=True)
        loss = (advantage ** 2).mean() + spread.nan_to_num().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
"""
    )
    run = run_cli("--quiet", "main.py", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    found = {f["line"]: f for f in run.findings("degenerate_op")}
    assert sorted(found) == [line_of(main, "advantage ="), line_of(main, "spread =")]
    mean = found[line_of(main, "advantage =")]
    assert mean["op"] == "Tensor.mean" and mean["operands"][0]["name"] == "values"
    assert "the result is its input, unchanged" in mean["message"]
    assert "NaN" in found[line_of(main, "spread =")]["advice"]


@pytest.mark.backend
def test_ordinary_code_is_not_degenerate(script, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The traps: a (B, 1) output into BCEWithLogitsLoss, a squeeze with its dim, a last
    batch of one reduced over its batch dim, a softmax and keepdim reductions over real
    dims, a sum that squeezes a (B, 1) on purpose, attention over keys that grow from one,
    a squeeze of inputs whose rank differs, and a squeeze of a named dim."""
    script(
        _DATA.format(n=9)
        + """
criterion = nn.BCEWithLogitsLoss()
for epoch in range(3):
    for xb, yb in loader:  # 8 samples, then a batch of one
        logits = model(xb)
        loss = criterion(logits, yb.unsqueeze(1)) + F.mse_loss(logits.squeeze(1), yb)
        centred = xb - xb.mean(0, keepdim=True)
        scale = xb.amax(dim=-1, keepdim=True)
        total = logits.sum(dim=1)
        weights = F.softmax(xb, dim=-1)
        unit = F.normalize(xb, dim=1)
        opt.zero_grad()
        loss.backward()
        opt.step()

keys = torch.randn(1, 4)
for step in range(6):  # a decoder's attention: one key at first, then more
    scores = torch.randn(1, 4) @ keys.T
    attn = scores.softmax(dim=-1)
    keys = torch.cat([keys, torch.randn(1, 4)])

def flat(t):
    out = t.squeeze()
    return out

for t in (torch.ones(4, 1), torch.ones(4, 5, 1), torch.ones(4, 1), torch.ones(4, 5, 1)):
    flat(t)

for channels in (3, 1, 3, 1):  # the dim named: dropped only where it has size 1
    part = torch.ones(4, channels).squeeze(1)
"""
    )
    run = run_cli("--quiet", "main.py", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert run.findings("degenerate_op") == []


def test_degenerate_ops_can_be_turned_off(script, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    script(
        _DATA.format(n=16)
        + """
for xb, yb in loader:
    logp = F.log_softmax(model(xb), dim=1)
"""
    )
    assert run_cli("--quiet", "main.py", cwd=tmp_path).findings("degenerate_op")
    run = run_cli("--quiet", "--no-findings", "degenerate", "main.py", cwd=tmp_path)
    assert run.findings("degenerate_op") == []


async def test_the_editor_shows_a_degenerate_op(lsp: LspSession) -> None:
    path, _ = lsp.write(
        "train.py",
        _DATA.format(n=32)
        + """
for xb, yb in loader:
    logp = F.log_softmax(model(xb), dim=1)
""",
    )
    uri = lsp.open(path)
    result = await lsp.run(uri)
    assert result["status"] == "ok", result
    [diagnostic] = [d for d in lsp.client.diagnostics[uri] if d.code == "degenerate_op"]
    assert diagnostic.range.start.line == line_of(path, "logp =") - 1
    assert diagnostic.severity == types.DiagnosticSeverity.Warning
    assert diagnostic.message.startswith("degenerate op: F.log_softmax of `model(xb)` (8, 1)")
    assert "0 everywhere" in diagnostic.message
