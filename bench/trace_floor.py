"""Where the 3.11 MLP's tracing time goes: the same training steps, in one process,
alternating, untraced; under a ``sys.settrace`` function that does nothing (CPython's own
price for tracing: every call of torch's Python code is a call event); under ShapeLens's
tracer without and with the module tree.

Usage: python bench/trace_floor.py [--rounds N] [--steps N] [--out FILE]
(3.11: the sys.settrace backend; on 3.12+ the tracer rows use sys.monitoring). ``make bench``
runs it on 3.11 only: on 3.12+ the floor is a no-op ``sys.monitoring`` tool, not
``sys.settrace``; ``step_costs.py`` measures there against it.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

import torch
from models import mlp  # bench/ is on sys.path: these scripts run as files
from report import emit_table

from shapelens.engine.backends.choice import (
    GATE_VARIABLE,
    choose_backend,
)
from shapelens.engine.backends.library_gate import built_gate
from shapelens.engine.modules.tree import ModuleTree
from shapelens.engine.recording.scope import ScopeConfig, UserCodeScope
from shapelens.engine.session import engine_for

TRAINING = textwrap.dedent(
    """
    def train(model, x, y, optimizer, loss_fn, steps):
        for _ in range(steps):
            optimizer.zero_grad()
            pred = model(x)
            loss = loss_fn(pred, y)
            loss.backward()
            optimizer.step()
        return loss
    """
)


def _nothing(frame: FrameType, event: str, arg: Any) -> None:
    return None


def main() -> int:
    folder = tempfile.mkdtemp(prefix="shapelens-floor-")
    try:
        return _measure(folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _measure(folder: str) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--out", type=Path)
    options = parser.parse_args()
    script = Path(folder) / "training.py"
    script.write_text(TRAINING)  # user code: a file under the scope's root
    namespace: dict[str, Any] = {}
    exec(compile(TRAINING, str(script), "exec"), namespace)
    train: Callable[..., Any] = namespace["train"]

    torch.set_num_threads(1)
    torch.manual_seed(0)
    model, x, y = mlp(torch)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = torch.nn.MSELoss()
    scope = UserCodeScope(ScopeConfig(root=folder))
    backend = f"sys.{choose_backend().kind}"

    def steps() -> float:
        start = time.process_time()
        train(model, x, y, optimizer, loss_fn, options.steps)
        return time.process_time() - start

    def under_tracer(with_tree: bool, gate: bool = True) -> float:
        if not gate:
            os.environ[GATE_VARIABLE] = "0"  # plain sys.settrace (read when it is built)
        built = engine_for(scope.config)
        events, engine = built.recorder, built.backend
        tree = ModuleTree(built.scope, built.sources)
        engine.start()
        if with_tree:
            tree.install(engine, events)
        try:
            return steps()
        finally:
            engine.stop()  # the tree watched through it: nothing of it is left
            os.environ.pop(GATE_VARIABLE, None)

    def under_nothing() -> float:
        sys.settrace(_nothing)
        try:
            return steps()
        finally:
            sys.settrace(None)

    variants: dict[str, Callable[[], float]] = {
        "untraced": steps,
        "sys.settrace(a function that does nothing)": under_nothing,
        f"ShapeLens tracer ({backend}), no module tree": lambda: under_tracer(False),
        f"ShapeLens tracer ({backend}) + module tree (the default)": lambda: under_tracer(True),
    }
    if built_gate() is not None:  # CPython 3.11 with the gate built
        variants["the same without the gate (plain sys.settrace)"] = lambda: under_tracer(
            True, gate=False
        )
    train(model, x, y, optimizer, loss_fn, 30)  # warm-up: lazy imports, allocator
    best = dict.fromkeys(variants, float("inf"))
    for _ in range(options.rounds):
        for name, run in variants.items():
            best[name] = min(best[name], run())
    base = best["untraced"]
    per_step = 1000 * base / options.steps
    rows = ["| variant | CPU s | vs untraced |", "|---|---:|---:|"]
    rows += [f"| {name} | {value:.4f} | {value / base:.2f}× |" for name, value in best.items()]
    emit_table(
        f"Where the MLP's tracing time goes (Python {sys.version.split()[0]}): {options.steps}"
        f" training steps ({per_step:.2f} ms each untraced), in one process, least of"
        f" {options.rounds} alternating rounds.",
        rows,
        options.out,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
