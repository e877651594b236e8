"""A 2-rank DDP run (torchrun, gloo, CPU) traced by ShapeLens against the same run untraced:
CPU time of rank 0's hot section, median of N, alternating. Usage: distributed.py [--out F]"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from report import emit  # bench/ is on sys.path: these scripts run as files

WORKLOAD = Path(__file__).with_name("workloads") / "ddp_train.py"


def _run(command: list[str], out: Path) -> float:
    env = {**os.environ, "SHAPELENS_BENCH_OUT": str(out)}
    for attempt in range(2):  # torchrun's rendezvous can fail for a moment: retry once
        out.unlink(missing_ok=True)
        done = subprocess.run(
            command, env=env, cwd=WORKLOAD.parent, capture_output=True, timeout=600
        )
        if done.returncode == 0:
            return float(json.loads(out.read_text())["cpu_s"])
        if attempt == 1:
            raise SystemExit(f"{' '.join(command[2:6])} failed:\n{done.stderr.decode()[-2000:]}")
    raise AssertionError("unreachable")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", type=Path)
    options = parser.parse_args()
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2"]
    traced = [sys.executable, "-m", "shapelens", "run", "--quiet", "--nproc-per-node", "2"]
    plain: list[float] = []
    shapelens: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "result.json"
        for _ in range(options.repeat):
            plain.append(_run([*torchrun, str(WORKLOAD)], out))
            shapelens.append(_run([*traced, str(WORKLOAD)], out))
    base, mine = statistics.median(plain), statistics.median(shapelens)
    emit(
        [
            f"Distributed: 2-rank DDP (gloo, CPU), rank 0 hot section, median of {options.repeat}.",
            "",
            "| run | CPU (s) | ratio |",
            "|---|---:|---:|",
            f"| torchrun, untraced | {base:.3f} | 1.00× |",
            f"| shapelens run --nproc-per-node 2 | {mine:.3f} | {mine / base:.2f}× |",
        ],
        options.out,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
