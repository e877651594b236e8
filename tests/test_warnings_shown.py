"""A program's warnings under ShapeLens are the program's own: the same text, file and line,
shown as often as plain ``python`` shows them (Python's once-per-location filter included),
also when torch warns from inside a call the op watch follows."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from conftest import CHILD_PYTHON, line_of, need, run_cli

need("torch")

TWO_LINES = """
import warnings

import torch
import torch.nn.functional as F

pred = torch.randn(32, 1)
target = torch.randn(32)


def train_loss(p, t):
    return F.mse_loss(p, t)


def eval_loss(p, t):
    return F.mse_loss(p, t)


for step in range(20):
    a = train_loss(pred, target)
    b = eval_loss(pred, torch.randn(32))
    c = torch.ones(3, 4).view(-1) @ torch.ones(12)
warnings.warn("the program's own warning")
print("done")
"""


def test_warnings_from_two_lines_show_as_under_plain_python(script, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    main = script(TWO_LINES)
    plain = subprocess.run(
        [CHILD_PYTHON or sys.executable, "main.py"], cwd=tmp_path, capture_output=True, text=True
    )
    run = run_cli("--quiet", "main.py", cwd=tmp_path)
    assert run.returncode == plain.returncode == 0
    assert run.stdout == plain.stdout == "done\n"
    assert run.stderr == plain.stderr
    for marker in ("return F.mse_loss(p, t)", "warnings.warn("):
        assert run.stderr.count(f"main.py:{line_of(main, marker)}:") >= 1, run.stderr
    assert run.stderr.count("UserWarning: Using a target size") == 2  # once per line
    assert "shapelens" not in run.stderr
    findings = (
        [f for f in run.trace["findings"] if f["kind"] == "library_warning"] if run.trace else []
    )
    lines = sorted({f["line"] for f in findings})
    assert lines == [line_of(main, "def train_loss") + 1, line_of(main, "def eval_loss") + 1]


def test_a_shape_only_run_shows_them_at_the_program_s_lines(script, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """On fake tensors every torch call goes through the shape-only run's own function mode:
    torch's warnings are still the program's, once per line, as under plain ``python``."""
    script(TWO_LINES)
    plain = subprocess.run(
        [CHILD_PYTHON or sys.executable, "main.py"], cwd=tmp_path, capture_output=True, text=True
    )
    run = run_cli("--quiet", "--fake", "main.py", cwd=tmp_path)
    assert run.returncode == plain.returncode == 0
    assert run.stdout == plain.stdout == "done\n"
    assert run.stderr == plain.stderr
    assert "shapelens" not in run.stderr


SPARSE = """
import torch
from torch import nn

indices = torch.tensor([[0, 1, 2], [1, 2, 0]])
adjacency = torch.sparse_coo_tensor(indices, torch.ones(3), (3, 3))
layer = nn.Linear(8, 4)
for step in range(3):
    hidden = layer(torch.randn(3, 8))
    propagated = torch.sparse.mm(adjacency, hidden)
with torch.sparse.check_sparse_tensor_invariants():
    try:
        torch.sparse_coo_tensor(torch.tensor([[0, 5]]), torch.ones(2), (3,))
    except RuntimeError:
        print("checked")
print(tuple(propagated.shape))
"""


def test_a_sparse_tensor_s_warning_is_the_program_s_own(script, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """torch (2.13; not 2.4) warns from C++ when a sparse tensor is made without an invariant check:
    under plain ``python`` once, at the program's line. So too in a traced run and in a shape-only
    one (where every call goes through the run's own function mode)."""
    main = script(SPARSE)
    plain = subprocess.run(
        [CHILD_PYTHON or sys.executable, "main.py"], cwd=tmp_path, capture_output=True, text=True
    )
    assert (plain.returncode, plain.stdout) == (0, "checked\n(3, 4)\n")
    if plain.stderr:  # torch 2.4 does not warn here; later releases do, once
        at = f"{main}:{line_of(main, 'adjacency =')}: UserWarning: Sparse"
        assert plain.stderr.startswith(at) and plain.stderr.count("UserWarning") == 1
    for flags in ((), ("--fake",)):
        run = run_cli("--quiet", *flags, "main.py", cwd=tmp_path)
        assert (flags, run.returncode, run.stdout, run.stderr) == (
            flags,
            0,
            plain.stdout,
            plain.stderr,
        )
