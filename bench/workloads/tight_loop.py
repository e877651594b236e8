"""Benchmark workload: 20,000 iterations of a few small tensor ops (per-line tracer cost).

Only ``train()`` is timed (CPU time). SHAPELENS_BENCH_WRAP picks the comparison tracer that
wraps it; the result goes as JSON to SHAPELENS_BENCH_OUT. The wrap/report boilerplate is
repeated in every workload on purpose: a shared helper module would be traced as user code.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from typing import Any

import torch


def _scaled(count: int) -> int:
    """SHAPELENS_BENCH_SCALE shrinks the loop for `run_bench.py --quick` (a harness check)."""
    return max(1, round(count * float(os.environ.get("SHAPELENS_BENCH_SCALE", "1"))))


NAME = "tight_loop"
ITERATIONS = _scaled(20_000)


def _wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Decorate ``fn`` with the tracer under test; its log goes to /dev/null, not a terminal."""
    tool = os.environ.get("SHAPELENS_BENCH_WRAP", "none")
    if tool == "none":
        return fn
    sink = open(os.devnull, "w")  # noqa: SIM115 - must outlive the traced call
    if tool == "torchsnooper":
        import torchsnooper  # type: ignore[import-not-found,unused-ignore]  # anchors venv

        traced: Callable[..., Any] = torchsnooper.snoop(output=sink)(fn)
        return traced
    if tool == "snoop":
        import snoop  # type: ignore[import-not-found,unused-ignore]  # anchors venv

        traced = snoop.Config(out=sink, color=False).snoop()(fn)
        return traced
    raise SystemExit(f"unknown SHAPELENS_BENCH_WRAP: {tool}")


def _report(cpu_s: float) -> None:
    with open(os.environ["SHAPELENS_BENCH_OUT"], "w") as out:
        json.dump({"workload": NAME, "cpu_s": cpu_s}, out)


def train(a: torch.Tensor, b: torch.Tensor) -> float:
    total = torch.zeros(())
    for _ in range(ITERATIONS):
        a = a * 0.5 + b
        c = a.sum()
        total = total + c
    return total.item()


def main() -> None:
    torch.set_num_threads(1)  # idle OpenMP workers would add CPU time that is not tracing
    torch.manual_seed(0)
    a = torch.randn(8)
    b = torch.randn(8)
    hot = _wrap(train)
    start = time.process_time()
    hot(a, b)
    _report(time.process_time() - start)


if __name__ == "__main__":
    main()
