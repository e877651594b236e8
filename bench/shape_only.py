"""Shape-only runs: GPTs trained on simulated CUDA under `shapelens run --fake`.

Wall time and peak RSS (getrusage of waited-for children) of the whole traced run: model
construction, AdamW steps of 8 × 128 tokens, each logging its `loss.item()` (simulated); next
to what the same model would need for real (fp32 weights, gradients and AdamW's two moments).
Targets (issue 39): a 1.6B-parameter GPT's training step under 10 s and 500 MB of RSS.
Then "will it fit": a ~7B decoder in bf16 with AdamW on a 24 GiB budget, its peak as the run
counted it and the line where the budget ran out.
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
from typing import Any

from report import emit  # bench/ is on sys.path: these scripts run as files

PROGRAM = Path(__file__).resolve().parent / "workloads" / "gpt_shapes"
PROBE = "import torch; torch.save(torch.nn.Linear(2048, 10).state_dict(), 'probe.pt')"
MEASURE = (
    "import resource, subprocess, sys, time\n"
    "start = time.perf_counter()\n"
    "subprocess.run(sys.argv[1:])\n"
    "print(time.perf_counter() - start, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
)


def measure(python: str, *extra: str) -> tuple[float, float, dict[str, Any]]:
    """(wall s, peak RSS MiB, trace) of the shape-only run with ``python``; ``extra``: more
    options for `shapelens run`, then `--` and the program's own."""
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        for name in ("model.py", "train.py"):
            shutil.copy(PROGRAM / name, work / name)
        subprocess.run([python, "-c", PROBE], cwd=work, check=True)
        trace_path = work / "trace.json"
        at = extra.index("--") if "--" in extra else len(extra)
        ours, theirs = extra[:at], extra[at + 1 :]
        command = [python, "-m", "shapelens", "run", "--fake", "--quiet", "--modules", *ours]
        argv = [sys.executable, "-c", MEASURE, *command, "--json", str(trace_path), "train.py"]
        done = subprocess.run(
            [*argv, *theirs],
            cwd=work,
            capture_output=True,
            text=True,
            check=True,
        )
        wall, rss_kib = done.stdout.split()[-2:]
        return float(wall), int(rss_kib) / 1024, json.loads(trace_path.read_text())


def _import_rss_mib(python: str) -> float:
    """Peak RSS of ``python -c "import torch"``: what any run of that torch holds first."""
    done = subprocess.run(
        [sys.executable, "-c", MEASURE, python, "-c", "import torch"],
        capture_output=True,
        text=True,
        check=True,
    )
    return int(done.stdout.split()[-1]) / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--python", action="append", default=None)
    parser.add_argument("--out", type=Path, default=None)
    options = parser.parse_args()
    rows = [
        "| shape-only run (`--fake`), GPT on simulated `cuda` | params | status | values "
        "simulated | wall | peak RSS | `import torch` alone | target | real fp32 training "
        "would hold |",
        "|---|---:|---|---:|---:|---:|---:|---|---:|",
    ]
    runs = (  # (what, the program's options, the targets: wall s, RSS bytes)
        ("one AdamW step", ("--depth", "28", "--steps", "1"), (10.0, 500e6)),
        ("the whole script: 4 AdamW steps, each logged", ("--depth", "20"), None),
    )
    # A relative interpreter (the Makefile's .venv/bin/python) from the runs' own folders.
    pythons = [str(Path(p).absolute()) if "/" in p else p for p in options.python or []]
    for python in pythons or [sys.executable]:
        imported = _import_rss_mib(python)  # the CUDA build of torch loads its libraries
        for what, program_options, target in runs:
            wall, rss_mib, trace = measure(python, "--", *program_options)
            params = int(trace["modules"][0]["params"])  # type: ignore[index]
            real_gib = params * 4 * 4 / 2**30  # weights, gradients, two AdamW moments
            simulated = sum(s["values"] + s["decisions"] for s in trace["shape_only"]["simulated"])
            if target is None:
                aim = ""
            else:
                met = wall < target[0] and rss_mib * 2**20 < target[1]
                aim = f"< {target[0]:.0f} s, < {target[1] / 1e6:.0f} MB: " + (
                    "met" if met else "MISSED"
                )
            rows.append(
                f"| Python {trace['python']}, {what}, 8 × 128 tokens | {params / 1e9:.2f}B | "
                f"{trace['status']} | {simulated} | {wall:.1f} s | {rss_mib:.0f} MiB | "
                f"{imported:.0f} MiB | {aim} | "
                f"{real_gib:.0f} GiB |"
            )
    rows += [
        "",
        "| will it fit? bf16 decoder, AdamW, 24 GiB budget | params | wall | peak (line) | "
        "parameters / gradients / AdamW state | out of memory at |",
        "|---|---:|---:|---|---|---|",
    ]
    for python in pythons or [sys.executable]:
        wall, _, trace = measure(
            python, "--gpu-memory", "24GiB", "--", "--width", "4096", "--depth", "32",
            "--heads", "32", "--dtype", "bfloat16", "--steps", "2",
        )  # fmt: skip
        params = int(trace["modules"][0]["params"])
        [gpu] = [d for d in trace["memory"]["devices"] if d["device"].startswith("cuda")]
        parts = gpu["breakdown"]
        split = " / ".join(
            f"{parts.get(k, 0) / 2**30:.1f}" for k in ("parameters", "gradients", "optimizer state")
        )
        ran_out = [f for f in trace["findings"] if f["kind"] == "out_of_memory"]
        where = f"{Path(ran_out[0]['file']).name}:{ran_out[0]['line']}" if ran_out else "-"
        rows.append(
            f"| Python {trace['python']} | {params / 1e9:.2f}B | {wall:.1f} s | "
            f"{gpu['peak_bytes'] / 2**30:.1f} GiB ({Path(gpu['file']).name}:{gpu['line']}) | "
            f"{split} GiB | {where} |"
        )
    emit(rows, options.out)


if __name__ == "__main__":
    main()
