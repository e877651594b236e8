"""Will it fit, measured: a shape-only run's memory and FLOPs against a real run's.

For an MLP, a CNN, a GPT, an LSTM and a U-Net (bench/workloads/memory/), one AdamW step on
the CPU: the real run's live tensor bytes, counted by a storage-tracking dispatch mode on
real tensors (bench/memory_real.py), and its FLOPs by torch's FlopCounterMode, next to what
`shapelens run --fake` reports for the same program. The peak must be within 10 %;
parameters, gradients and AdamW's state exact; FLOPs equal.
Usage: python bench/memory_accuracy.py [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from report import emit  # bench/ is on sys.path: these scripts run as files

BENCH = Path(__file__).resolve().parent
PROGRAMS = ("mlp", "cnn", "gpt", "lstm", "unet")
EXACT = ("parameters", "gradients", "optimizer state")


def real(program: Path, *options: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, str(BENCH / "memory_real.py"), str(program), *options],
        capture_output=True,
        text=True,
        check=True,
    )
    found: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return found


def shape_only(program: Path) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as folder:
        trace_path = Path(folder) / "trace.json"
        subprocess.run(
            [sys.executable, "-m", "shapelens", "run", "--fake", "--quiet", "--json",
             str(trace_path), str(program)],
            check=True,
            capture_output=True,
        )  # fmt: skip
        memory = json.loads(trace_path.read_text())["memory"]
    [cpu] = [d for d in memory["devices"] if d["device"] == "cpu"]
    return {"peak": cpu["peak_bytes"], "breakdown": cpu["breakdown"], "flops": memory["flops"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=None)
    options = parser.parse_args()
    rows = [
        "| one AdamW step (CPU) | real peak | shape-only peak | ratio | real peak, oneDNN off "
        "| ratio to it | parameters, gradients, AdamW state | FLOPs (FlopCounterMode) "
        "| shape-only FLOPs |",
        "|---|---:|---:|---:|---:|---:|---|---:|---:|",
    ]
    for name in PROGRAMS:
        program = BENCH / "workloads" / "memory" / f"{name}.py"
        measured, estimated = real(program), shape_only(program)
        plain = real(program, "--no-onednn")  # the CPU's kernels without oneDNN's workspaces
        exact = all(measured["breakdown"].get(k) == estimated["breakdown"].get(k) for k in EXACT)
        state = " / ".join(f"{measured['breakdown'].get(k, 0) / 2**20:.2f}" for k in EXACT)
        rows.append(
            f"| {name} | {measured['peak'] / 2**20:.2f} MiB | {estimated['peak'] / 2**20:.2f} MiB"
            f" | {estimated['peak'] / measured['peak']:.3f} | {plain['peak'] / 2**20:.2f} MiB"
            f" | {estimated['peak'] / plain['peak']:.3f} | {state} MiB, "
            f"{'exact' if exact else 'DIFFER'} | {measured['flops']:,} | {estimated['flops']:,} |"
        )
    emit(rows, options.out)


if __name__ == "__main__":
    main()
