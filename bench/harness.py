"""What every workload shares: loop scaling, wrapping the hot function in the tracer under
test, timing it (CPU time) and reporting. It lives outside ``workloads/`` (the folder
``shapelens run`` starts in), so ShapeLens does not count it as user code."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from typing import Any


def scaled(count: int) -> int:
    """SHAPELENS_BENCH_SCALE shrinks the loop for `run_bench.py --quick` (a harness check)."""
    return max(1, round(count * float(os.environ.get("SHAPELENS_BENCH_SCALE", "1"))))


def _wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Decorate ``fn`` with the tracer under test; its log goes to /dev/null, not a terminal."""
    tool = os.environ.get("SHAPELENS_BENCH_WRAP", "none")
    if tool == "none":
        return fn
    # An open stream: given a path, both libraries reopen the file for every line they log.
    sink = open(os.devnull, "w")  # noqa: SIM115 - must outlive the traced call
    if tool == "shapelens-snoop":
        from shapelens import snoop

        traced: Callable[..., Any] = snoop(output=sink, color=False)(fn)
        return traced
    if tool == "torchsnooper":
        import torchsnooper  # type: ignore[import-not-found,unused-ignore]  # anchors venv

        traced = torchsnooper.snoop(output=sink)(fn)
        return traced
    if tool == "snoop":
        import snoop  # type: ignore[import-not-found,unused-ignore]  # anchors venv

        traced = snoop.Config(out=sink, color=False).snoop()(fn)
        return traced
    raise SystemExit(f"unknown SHAPELENS_BENCH_WRAP: {tool}")


def measure(name: str, hot: Callable[..., Any], *args: Any) -> None:
    """Run ``hot(*args)`` under the chosen tracer and report its CPU time as JSON."""
    try:
        import torch

        torch.set_num_threads(1)  # idle OpenMP workers would add CPU time that is not tracing
    except ImportError:
        pass  # numpy workloads also run where torch is not installed (Python 3.12+ here)
    wrapped = _wrap(hot)
    start = time.process_time()
    wrapped(*args)
    cpu_s = time.process_time() - start
    with open(os.environ["SHAPELENS_BENCH_OUT"], "w") as out:
        json.dump({"workload": name, "cpu_s": cpu_s}, out)
