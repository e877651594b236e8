"""Benchmark workload: the seed story's example 2 (a broadcasting Linear fit), 200 steps.

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


NAME = "seed_loop"
STEPS = _scaled(200)


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


def train(
    model: torch.nn.Linear, x: torch.Tensor, y: torch.Tensor, optimizer: torch.optim.SGD
) -> float:
    loss = torch.zeros(())
    for _ in range(STEPS):
        optimizer.zero_grad()
        pred = model(x)
        squared_diff = (y - pred) ** 2  # (4,) - (4, 1) broadcasts to (4, 4): the seed bug
        loss = squared_diff.mean()
        loss.backward()
        optimizer.step()
    return loss.item()


def main() -> None:
    torch.set_num_threads(1)  # idle OpenMP workers would add CPU time that is not tracing
    torch.manual_seed(0)
    model = torch.nn.Linear(2, 1)
    x = torch.tensor([[0.0, 0.0], [0.0, 1.0], [1.0, 0.0], [1.0, 1.0]])
    y = torch.tensor([3.0, 5.0, 4.0, 6.0])
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    hot = _wrap(train)
    start = time.process_time()
    hot(model, x, y, optimizer)
    _report(time.process_time() - start)


if __name__ == "__main__":
    main()
