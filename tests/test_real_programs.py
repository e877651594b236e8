"""The whole-script benchmark's char-level GPT (``bench/programs/char_gpt``: two files,
argparse, a Dataset and a DataLoader, AdamW, ``loss.item()`` logging) run as a user runs it,
clean and with a classic bug planted, against an untuned run (``SHAPELENS_UNTUNED=1``: every
hit read and checked, no statement or module tree quiet, no line switched off). What the
speed tuning skips must change nothing the user is told. The library programs of the same
table are compared in ``test_library_stack.py``."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from conftest import Run, line_of, need, run_cli, told

# Not marked `backend`: the tuning is the same on 3.13 as on 3.12, which the full suite runs.

need("torch")

CHAR_GPT = Path(__file__).resolve().parents[1] / "bench" / "programs" / "char_gpt"
SMALL = ("--words", "700", "--max-steps", "20")
"""630 training names (70 held out) in batches of 32: 19 full ones, then one of 22."""
HARD_CODED_BATCH = (
    "y = y.transpose(1, 2).contiguous().view(B, T, C)",
    "y = y.transpose(1, 2).contiguous().view(32, T, C)",
)
"""The attention's output reshaped with the configured batch size: the last batch fails."""


def _untimed(stdout: str) -> str:
    return re.sub(r"step time [0-9.]+ms", "step time", stdout)


def tuned_and_untuned(folder: Path, *args: str) -> tuple[Run, Run]:
    """Both runs start a new interpreter: the untuned schedules are read at import."""
    tuned = run_cli("--quiet", *args, cwd=folder, cold=True, timeout=240)
    untuned = run_cli(
        "--quiet", *args, cwd=folder, cold=True, timeout=240, env={"SHAPELENS_UNTUNED": "1"}
    )
    return tuned, untuned


def test_the_clean_script_tells_the_same_as_untuned(tmp_path: Path) -> None:
    folder = tmp_path / "char_gpt"
    shutil.copytree(CHAR_GPT, folder)
    tuned, untuned = tuned_and_untuned(folder, "train.py", *SMALL)
    assert tuned.returncode == untuned.returncode == 0, tuned.stderr
    assert _untimed(tuned.stdout) == _untimed(untuned.stdout)  # the losses: the same run
    assert told(tuned) == told(untuned) == []
    # the last, smaller batch is on the model's lines in both
    for run in (tuned, untuned):
        assert run.trace is not None
        shapes = [
            v["shapes"]
            for entry in run.trace["lines"]
            if entry["file"].endswith("model.py")
            for v in entry["vars"]
            if v["name"] == "x" and entry["line"] == line_of(folder / "model.py", "x = block(x)")
        ]
        assert shapes and [22, 9, 64] in shapes[0], shapes


def test_a_bug_on_the_last_batch_is_told_the_same_as_untuned(tmp_path: Path) -> None:
    folder = tmp_path / "char_gpt"
    shutil.copytree(CHAR_GPT, folder)
    model = folder / "model.py"
    source = model.read_text()
    assert HARD_CODED_BATCH[0] in source
    model.write_text(source.replace(*HARD_CODED_BATCH))
    tuned, untuned = tuned_and_untuned(folder, "train.py", *SMALL)
    assert tuned.returncode == untuned.returncode == 1
    found = told(tuned)
    assert found == told(untuned)
    [(kind, file, line, _, error, operands, chain)] = found
    assert (kind, file, line) == ("shape_mismatch", "model.py", line_of(model, HARD_CODED_BATCH[1]))
    assert error == "shape '[32, 9, 64]' is invalid for input of size 12672"
    assert operands == (("y.transpose(1, 2).contiguous()", (22, 9, 4, 16)),)
    assert chain[0] == (
        "train.py",
        line_of(folder / "train.py", "for X, Y in loader:"),
    )  # for X, Y in loader: the batch of 22
