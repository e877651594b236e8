"""The seed story's two examples give exactly the metadata TorchSnooper showed, plus findings."""

from __future__ import annotations

import shutil
from pathlib import Path

from conftest import EXAMPLES, line_of, need, run_cli

need("torch")


def test_example_2_broadcast_in_the_training_loop(tmp_path: Path) -> None:
    example = tmp_path / "seed_linear_fit.py"
    shutil.copy(EXAMPLES / "seed_linear_fit.py", example)
    run = run_cli(example.name, cwd=tmp_path)

    assert run.returncode == 0
    assert run.trace is not None and run.trace["status"] == "ok"
    x = run.var(example, line_of(example, "x = torch.tensor"), "x")
    assert (x["shape"], x["dtype"], x["device"], x["requires_grad"]) == (
        [4, 2],
        "float32",
        "cpu",
        False,
    )
    y = run.var(example, line_of(example, "y = torch.tensor"), "y")
    assert (y["shape"], y["dtype"]) == ([4], "float32")
    pred = run.var(example, line_of(example, "pred = model(x)"), "pred")
    assert (pred["shape"], pred["requires_grad"], pred["hits"], pred["shapes"]) == (
        [4, 1],
        True,
        10,
        [[4, 1]],
    )
    diff_line = line_of(example, "squared_diff = (y - pred) ** 2")
    diff = run.var(example, diff_line, "squared_diff")
    assert (diff["shape"], diff["hits"], diff["grad_fn"]) == ([4, 4], 10, "PowBackward0")
    loss = run.var(example, line_of(example, "loss = squared_diff.mean()"), "loss")
    assert loss["shape"] == []
    assert run.line(example, line_of(example, "optimizer.step()"))["hits"] == 10

    [broadcast] = run.findings("broadcast")
    assert broadcast["line"] == diff_line and broadcast["severity"] == "warning"
    assert "(4,)" in broadcast["message"] and "(4, 1)" in broadcast["message"]
    assert "(4, 4)" in broadcast["message"]
    # The listing shows it at the line, the script's own output passed through untouched.
    diff_row = next(row for row in run.stderr.splitlines() if "squared_diff = (y" in row)
    assert diff_row.endswith("squared_diff (4,4)"), diff_row  # compact: the loop says ×10
    pred_row = next(row for row in run.stderr.splitlines() if "pred = model(x)" in row)
    assert pred_row.endswith("pred (4,1) grad"), pred_row  # gained from the weights
    assert "⚠ broadcast" in run.stderr
    assert len(run.stdout.splitlines()) == 10


def test_example_2_fixed_has_no_broadcast(tmp_path: Path) -> None:
    example = tmp_path / "fixed.py"
    example.write_text(
        (EXAMPLES / "seed_linear_fit.py").read_text().replace("model(x)", "model(x).squeeze()")
    )
    run = run_cli(example.name, cwd=tmp_path)
    assert run.var(example, line_of(example, "squared_diff ="), "squared_diff")["shape"] == [4]
    assert run.findings("broadcast") == []


def test_example_1_names_the_cpu_tensor_and_the_int64_mask(tmp_path: Path) -> None:
    example = tmp_path / "seed_device_mask.py"
    shutil.copy(EXAMPLES / "seed_device_mask.py", example)
    run = run_cli(example.name, cwd=tmp_path)

    assert run.returncode == 1 and run.trace is not None
    assert run.trace["status"] == "exception"
    def_line = line_of(example, "def myfunc")
    mask = run.var(example, def_line, "mask")
    assert (mask["shape"], mask["dtype"], mask["device"]) == ([6], "int64", "meta")
    x = run.var(example, def_line, "x")
    assert (x["shape"], x["dtype"], x["device"]) == ([3], "float32", "meta")
    zeros_line = line_of(example, "y = torch.zeros(6)")
    y = run.var(example, zeros_line, "y")
    assert (y["shape"], y["dtype"], y["device"]) == ([6], "float32", "cpu")

    failing = line_of(example, "y.masked_scatter_")
    assert run.trace["exception"]["line"] == failing
    assert run.trace["exception"]["type"] == "RuntimeError"
    [dtype] = run.findings("dtype_mismatch")
    assert dtype["line"] == failing and dtype["severity"] == "error"
    assert "`mask`" in dtype["message"] and "int64" in dtype["message"]
    mask_birth = line_of(example, "mask = torch.tensor")
    assert dtype["related"][0]["line"] == mask_birth
    [device] = run.findings("device_mismatch")
    assert device["line"] == failing
    assert device["related"][0]["line"] == zeros_line
    assert "`y`" in device["message"] and "cpu" in device["message"]
    # The user's traceback is python's own, without the runner's frames.
    assert "Traceback (most recent call last)" in run.stderr
    assert "shapelens/runner" not in run.stderr
