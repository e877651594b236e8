"""The seed's example 1 on a real GPU (skipped on machines without CUDA)."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import EXAMPLES, line_of, need, run_cli

torch = need("torch")
pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]


def test_seed_example_1_on_cuda(tmp_path: Path) -> None:
    example = tmp_path / "seed_cuda.py"
    source = (EXAMPLES / "seed_device_mask.py").read_text()
    example.write_text(source.replace('DEVICE = "meta"', 'DEVICE = "cuda"'))
    run = run_cli("--quiet", example.name, cwd=tmp_path)
    assert run.returncode == 1
    mask = run.var(example, line_of(example, "def myfunc"), "mask")
    assert (mask["dtype"], mask["device"]) == ("int64", "cuda:0")
    [device] = run.findings("device_mismatch")
    assert device["related"][0]["line"] == line_of(example, "y = torch.zeros(6)")


COURSE = """
import torch

w = torch.tensor(4.0, device="cuda", requires_grad=True)
for step in range(50):
    loss = (w - 1.0) ** 2 + 1.5
    loss.backward()
    with torch.no_grad():
        w -= 0.1 * w.grad
        w.grad.zero_()
"""


def test_gpu_scalars_are_read_only_when_asked(tmp_path: Path) -> None:
    example = tmp_path / "course.py"
    example.write_text(COURSE)
    line = line_of(example, "loss = (w - 1.0)")
    quiet = run_cli("--quiet", example.name, cwd=tmp_path)
    assert quiet.returncode == 0, quiet.stderr
    assert "history" not in quiet.var(example, line, "loss")  # no synchronising read
    asked = run_cli("--quiet", "--scalars-on-gpu", example.name, cwd=tmp_path)
    assert asked.returncode == 0, asked.stderr
    history = asked.var(example, line, "loss")["history"]
    assert history[0] == pytest.approx(10.5) and history[-1] < 2.0
