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
