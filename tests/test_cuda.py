"""The seed's example 1 on a real GPU (skipped on machines without CUDA)."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import EXAMPLES, line_of, run_cli

torch = pytest.importorskip("torch")
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
