"""A shape-only run goes through a whole script: the values it reads are simulated (and said
so, never shown as real), sizes that depend on the data run at their bound (``(≤32,8)``)."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema

from shapelens.trace.codec import SCHEMA_PATH

from conftest import line_of, need, run_cli

torch = need("torch")


def _hint_of(stderr: str, code: str) -> str:
    for row in stderr.splitlines():
        if "│" not in row:
            continue
        text = row.split("│", 1)[1].strip()
        if text.startswith(code):
            return text[len(code) :].strip()
    raise AssertionError(f"no listing row for {code!r}")


READS = """
    import math
    import torch

    model = torch.nn.Linear(3, 2).cuda()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    best, patience, total, correct = float("inf"), 0, 0.0, 0
    for epoch in range(10):
        x = torch.randn(8, 3, device="cuda")
        y = torch.randint(0, 2, (8,), device="cuda")
        logits = model(x)
        loss = torch.nn.functional.cross_entropy(logits, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        value = loss.item()
        total += value
        correct += (logits.argmax(1) == y).sum().item()
        if torch.isnan(loss) or not torch.isfinite(loss).all():
            raise SystemExit("the loss is not finite")
        if value < best:
            best, patience = value, 0
        else:
            patience += 1
        print(f"epoch {epoch} loss {loss:.3f} accuracy {correct / (8 * (epoch + 1)):.3f}")
        if patience >= 2:
            break
    steps = 0
    while loss > 0.01:
        steps += 1
    as_float, as_int = float(loss), int(y.sum())
    assert torch.allclose(logits, logits) and torch.equal(y, y)
    first = logits[logits.argmax(0)[0]]
    listed = logits.detach().cpu().tolist()
    array = logits.detach().cpu().numpy()
    print(loss)
    print(len(listed), array.shape, steps, math.isnan(total), as_float, as_int)
"""


def test_value_reads_go_on_with_simulated_values(script, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    main = script(READS)
    run = run_cli("--fake", "main.py", cwd=tmp_path, timeout=120)
    assert run.returncode == 0 and run.trace is not None, run.stderr
    trace = run.trace
    jsonschema.validate(trace, json.loads(SCHEMA_PATH.read_text()))
    assert trace["status"] == "ok", trace["exception"]
    # The ordinary path: a finite loss, an early stop after a plateau (not the first epoch),
    # a bounded `while`, numbers where numbers were asked for.
    assert run.stdout.splitlines() == [
        "epoch 0 loss 0.500 accuracy 0.125",
        "epoch 1 loss 0.500 accuracy 0.125",
        "epoch 2 loss 0.500 accuracy 0.125",
        "tensor(..., device='cuda:0', size=(), grad_fn=<NllLossBackward0>)",
        "8 (8, 2) 16 False 0.5 1",
    ]
    # Nothing of ShapeLens's doing shows as the program's (Python's deprecation of a float()
    # that returns a subclass, a warning about fake tensors).
    assert trace["findings"] == [] and "Warning" not in run.stderr, run.stderr
    where = {(s["line"]): (s["values"], s["decisions"]) for s in trace["shape_only"]["simulated"]}
    assert where[line_of(main, "value = loss.item()")] == (3, 0)
    assert where[line_of(main, "if torch.isnan(loss)")] == (0, 6)  # two tests, three epochs
    assert where[line_of(main, "if value < best:")] == (0, 3)  # comparing a simulated float
    assert where[line_of(main, "while loss > 0.01:")] == (0, 17)  # 16 passes, then False
    assert where[line_of(main, "listed = ")] == (1, 0)
    assert where[line_of(main, "assert torch.allclose(")] == (0, 2)  # both hold
    assert where[line_of(main, "first = logits[")] == (1, 0)  # a 0-dim index: position 0
    assert run.var(main, line_of(main, "first = logits["), "first")["shape"] == [2]
    assert where[line_of(main, "print(loss)")] == (1, 0)
    assert sum(v + d for v, d in where.values()) == trace_count(run.stderr)
    # Never shown as real: the value's type says so; hints say "simulated", not 0.5.
    value = run.var(main, line_of(main, "value = loss.item()"), "value")
    assert value["type"] == "simulated float"
    assert run.var(main, line_of(main, "total += value"), "total")["type"] == "simulated float"
    assert run.var(main, line_of(main, "correct += "), "correct")["type"] == "simulated int"
    assert _hint_of(run.stderr, "value = loss.item()") == "value simulated  [fake]"
    assert _hint_of(run.stderr, "if value < best:") == "branch on simulated value  [fake]"
    assert _hint_of(run.stderr, "print(loss)") == "simulated read  [fake]"
    assert _hint_of(run.stderr, "while loss > 0.01:").endswith("branch on simulated value  [fake]")


def trace_count(stderr: str) -> int:
    """The summary's count of simulated values (``12 values simulated``)."""
    summary = next(r for r in stderr.splitlines() if r.startswith("shapelens: shape-only run ("))
    words = summary.split(" values simulated")[0].split()
    return int(words[-1])


MASKS = """
    import torch
    from torch.nn.utils.rnn import pack_padded_sequence

    x = torch.randn(32, 8, device="cuda")
    scores = torch.randn(32, device="cuda")
    keep = scores > 0
    selected = x[keep]
    hidden = selected @ torch.randn(8, 4, device="cuda")
    rows = torch.nonzero(keep)
    picked = torch.masked_select(x, x > 0)
    labels = torch.unique(torch.randint(0, 5, (32,), device="cuda"))
    where_rows, where_cols = torch.where(x > 0)
    total = hidden.sum(dim=0)
    lengths = torch.tensor([5, 3, 2, 1])
    lstm = torch.nn.LSTM(8, 6, batch_first=True).cuda()
    steps = torch.randn(4, 5, 8, device="cuda")
    packed = pack_padded_sequence(steps, lengths, batch_first=True, enforce_sorted=False)
    _, (h_n, _) = lstm(packed)
    counts = torch.bincount(torch.randint(0, 5, (32,), device="cuda"), minlength=5)
"""


def test_data_dependent_sizes_run_at_their_bound(script, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    main = script(MASKS)
    run = run_cli("--fake", "main.py", cwd=tmp_path, timeout=60)
    assert run.returncode == 0 and run.trace is not None, run.stderr
    assert run.trace["status"] == "ok", run.trace["exception"]
    jsonschema.validate(run.trace, json.loads(SCHEMA_PATH.read_text()))
    selected = run.var(main, line_of(main, "selected = x[keep]"), "selected")
    assert (selected["shape"], selected["bounded_dims"]) == ([32, 8], [0])
    hidden = run.var(main, line_of(main, "hidden = selected @"), "hidden")
    assert (hidden["shape"], hidden["bounded_dims"]) == ([32, 4], [0])  # as unknown as its input
    assert run.var(main, line_of(main, "rows = torch.nonzero"), "rows")["bounded_dims"] == [0]
    assert run.var(main, line_of(main, "picked = "), "picked")["shape"] == [256]
    assert run.var(main, line_of(main, "labels = "), "labels")["bounded_dims"] == [0]
    assert "bounded_dims" not in run.var(main, line_of(main, "keep = scores > 0"), "keep")
    assert "bounded_dims" not in run.var(main, line_of(main, "total = hidden.sum"), "total")
    # Packed sequences at the longest length (the LSTM runs on them), bins as asked.
    data = run.var(main, line_of(main, "packed = pack_padded_sequence("), "packed.data")
    assert (data["shape"], data["bounded_dims"]) == ([20, 8], [0])
    assert run.var(main, line_of(main, "_, (h_n, _) = lstm("), "h_n")["shape"] == [1, 4, 6]
    assert run.var(main, line_of(main, "counts = torch.bincount("), "counts")["shape"] == [5]
    assert _hint_of(run.stderr, "selected = x[keep]") == "selected (≤32,8)  [fake]"
    assert _hint_of(run.stderr, 'hidden = selected @ torch.randn(8, 4, device="cuda")') == (
        "hidden (≤32,4)  [fake]"
    )
    assert _hint_of(run.stderr, "where_rows, where_cols = torch.where(x > 0)") == (
        "where_rows where_cols (≤256,) i64  [fake]"
    )
    # Memory at the bound: 32 rows of 8 float32 values, and the 32 int64 positions of the
    # selected rows (a GPU computes them too: the mask's nonzero).
    costs = {c["line"]: c for c in run.trace["memory"]["lines"]}
    assert costs[line_of(main, "selected = x[keep]")]["born_bytes"] == 32 * 8 * 4 + 32 * 8


async def test_the_editor_marks_simulated_values_and_bounds(lsp) -> None:  # type: ignore[no-untyped-def]
    from lsprotocol import types

    path, uri = lsp.write(
        "main.py",
        """
        import torch
        model = torch.nn.Linear(3, 1).cuda()
        for step in range(3):
            x = torch.randn(32, 3, device="cuda")
            loss = model(x).pow(2).mean()
            loss.backward()
            value = loss.item()
            print(f"loss {loss:.4f}")
            if loss < 1:
                pass
            kept = x[x[:, 0] > 0]
        """,
    )
    lsp.open(path)
    summary = await lsp.run(uri, fake=True)
    assert summary["status"] == "ok" and summary["shapeOnly"] is True
    assert summary["simulatedValues"] == 9  # 3 steps: .item(), the format, the `if`
    hints = await lsp.hints(uri)

    def at(code: str) -> int:
        return line_of(path, code) - 1

    assert hints[at("value = loss.item()")] == "value simulated  [fake]"
    assert hints[at('print(f"loss')] == "simulated read  [fake]"
    assert hints[at("if loss < 1:")] == "branch on simulated value  [fake]"
    assert hints[at("kept = x[")] == "kept (≤32,3)  [fake]"

    async def hover(code: str, word: str) -> str:
        line = at(code)
        column = path.read_text().splitlines()[line].index(word)
        found = await lsp.client.text_document_hover_async(
            types.HoverParams(
                text_document=types.TextDocumentIdentifier(uri=uri),
                position=types.Position(line, column),
            )
        )
        assert found is not None
        return str(found.contents.value)

    value = await hover("value = loss.item()", "value")
    assert "`simulated float`" in value and "| value | `simulated` |" in value
    assert "Not a real value" in value and "0.5" not in value.split("*A shape-only")[0]
    read = await hover('print(f"loss', "print")
    assert "**simulated** on this line: 3 values read" in read
    branch = await hover("if loss < 1:", "loss")
    assert "3 decisions taken on them" in branch
    kept = await hover("kept = x[", "kept")
    assert "| shape | `(≤32,3)` |" in kept and "depends on the data" in kept


def test_a_call_that_fails_on_a_stand_in_stops_the_run_without_a_finding(  # type: ignore[no-untyped-def]
    script, tmp_path: Path
) -> None:
    """`x.view(n, 5)` with `n` read by `.item()` fails on the stand-in (1), not on the
    program's value: no exception finding, which would be a false alarm, but a stop that
    says so."""
    main = script(
        """
        import torch
        x = torch.randn(6, 4, device="cuda")
        n = (x > 0).sum().item()
        y = x.view(n, 5)
        """
    )
    run = run_cli("--fake", "main.py", cwd=tmp_path, timeout=60)
    assert run.returncode == 0 and run.trace is not None, run.stderr
    assert run.trace["status"] == "shape_only_stop" and run.trace["findings"] == []
    stop = run.trace["exception"]
    assert stop["line"] == line_of(main, "y = x.view(n, 5)")
    assert stop["message"].startswith("`view` failed on a simulated value (shape '[1, 5]'")
