"""Shape-only runs: a ~1.2B-parameter GPT trained on simulated CUDA under `shapelens run --fake`.

Wall time and peak RSS (getrusage of waited-for children) of the whole traced run: model
construction, one AdamW step of 8 × 128 tokens, stopping at the first `loss.item()`; next to
what the same model would need for real (fp32 weights, gradients and AdamW's two moments).
Usage: python bench/shape_only.py [--python PY ...] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from report import emit  # bench/ is on sys.path: these scripts run as files

PROGRAM = Path(__file__).resolve().parent / "workloads" / "gpt_shapes"
PROBE = "import torch; torch.save(torch.nn.Linear(2048, 10).state_dict(), 'probe.pt')"
MEASURE = (
    "import resource, subprocess, sys, time\n"
    "start = time.perf_counter()\n"
    "subprocess.run(sys.argv[1:])\n"
    "print(time.perf_counter() - start, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
)


def measure(python: str) -> tuple[float, float, dict[str, object]]:
    """(wall s, peak RSS MiB, trace) of the shape-only run with ``python``."""
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        for name in ("model.py", "train.py"):
            shutil.copy(PROGRAM / name, work / name)
        subprocess.run([python, "-c", PROBE], cwd=work, check=True)
        trace_path = work / "trace.json"
        command = [python, "-m", "shapelens", "run", "--fake", "--quiet", "--modules"]
        done = subprocess.run(
            [sys.executable, "-c", MEASURE, *command, "--json", str(trace_path), "train.py"],
            cwd=work,
            capture_output=True,
            text=True,
            check=True,
        )
        wall, rss_kib = done.stdout.split()[-2:]
        return float(wall), int(rss_kib) / 1024, json.loads(trace_path.read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--python", action="append", default=None)
    parser.add_argument("--out", type=Path, default=None)
    options = parser.parse_args()
    rows = [
        "| shape-only run (`--fake`), GPT on simulated `cuda` | params | status | wall | "
        "peak RSS | real fp32 training would hold |",
        "|---|---:|---|---:|---:|---:|",
    ]
    for python in options.python or [sys.executable]:
        wall, rss_mib, trace = measure(python)
        params = int(trace["modules"][0]["params"])  # type: ignore[index]
        real_gib = params * 4 * 4 / 2**30  # weights, gradients, two AdamW moments
        version = str(trace["python"])
        rows.append(
            f"| Python {version}, one AdamW step of 8 × 128 tokens | {params / 1e9:.2f}B | "
            f"{trace['status']} | {wall:.1f} s | {rss_mib:.0f} MiB | {real_gib:.0f} GiB |"
        )
    emit(rows, options.out)


if __name__ == "__main__":
    main()
