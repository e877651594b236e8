"""Will it fit, measured: a shape-only run's memory and FLOPs against a real run's.

For an MLP, a CNN, a GPT, an LSTM and a U-Net (bench/workloads/memory/), one AdamW step on
the CPU: the real run's live tensor bytes, counted by a storage-tracking dispatch mode on
real tensors (bench/memory_real.py), and its FLOPs by torch's FlopCounterMode, next to what
`shapelens run --fake` reports for the same program. The peak must be within 10 %;
parameters, gradients and AdamW's state exact; FLOPs equal.
Then what counting costs a real run: the MLP and the GPT as a plain `shapelens run` and as
`shapelens run --memory` (the same watch over the real tensors), side by side.
Usage: python bench/memory_accuracy.py [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
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


def run_seconds(program: Path, *options: str) -> float:
    """CPU seconds of ``shapelens run`` (both processes; torch's import included), with one
    thread per kernel: on a busy machine OpenMP's spinning threads would swamp the rest."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(
        [sys.executable, "-m", "shapelens", "run", *options, "--quiet", str(program)],
        check=True,
        capture_output=True,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def cost_rows(repeats: int = 3) -> list[str]:
    """Each program's best of ``repeats``, the two kinds of run taking turns (so that a busy
    machine slows both alike)."""
    rows = [
        "| 10 × (model, one AdamW step) (CPU), CPU seconds | `shapelens run` "
        "| `shapelens run --memory` | ratio | less a run of `import torch`: plain, `--memory`, "
        "ratio |",
        "|---|---:|---:|---:|---:|",
    ]
    with tempfile.TemporaryDirectory() as folder:
        imports = Path(folder) / "imports.py"
        imports.write_text("import torch\nimport torch.nn.functional\n")
        base = min(run_seconds(imports) for _ in range(repeats))
        for name in ("mlp", "gpt"):
            # ten times the program (its lines traced: it is under the working directory), so
            # that its ops, not torch's import, make most of the time
            program = Path(folder) / f"{name}_x10.py"
            workload = BENCH / "workloads" / "memory" / f"{name}.py"
            program.write_text(
                f"import runpy\nfor _ in range(10):\n    runpy.run_path({str(workload)!r})\n"
            )
            plain = counted = float("inf")
            for _ in range(repeats):
                plain = min(plain, run_seconds(program))
                counted = min(counted, run_seconds(program, "--memory"))
            step, step_counted = plain - base, counted - base
            rows.append(
                f"| {name} | {plain:.2f} s | {counted:.2f} s | {counted / plain:.2f} "
                f"| {step:.2f} s, {step_counted:.2f} s, {step_counted / step:.2f} |"
            )
    return rows


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
    emit(cost_rows(), options.out)


if __name__ == "__main__":
    main()
