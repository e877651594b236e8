"""Where over a run the tracing time goes: the per-step cost of a training loop, step by
step, untraced, under a line tracer that does nothing (the floor any line tracer pays:
`noop_tracer.py`), under ShapeLens, and under ShapeLens with each mechanism switched off.

A run's overhead is not spread evenly: its first step meets every code object for the
first time, a statement's values are read on each of its first 64 hits, the op watch
follows hits 1-4, 8, 16, 32, 64..., and from then on only the loop header, a loss probe and
the module tree's call checks run on each step (`docs/speed.md` says why). So the table
splits the steps into those spans. Each measurement is a fresh process, as a run is (its
first step is the first time the tracer meets torch's code too), each step timed by the line
that ends it (`marks.append(time.perf_counter())`, traced like the rest), least of the
rounds per step, then summed per span.

Usage: python bench/step_costs.py [--rounds N] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

from models import mlp  # bench/ is on sys.path: these scripts run as files
from report import emit_table

TRAINING = textwrap.dedent(
    """
    import time


    def train(model, x, y, optimizer, loss_fn, steps, marks):
        for _ in range(steps):
            optimizer.zero_grad()
            pred = model(x)
            loss = loss_fn(pred, y)
            loss.backward()
            optimizer.step()
            marks.append(time.perf_counter())
        return loss.item()
    """
)
STEPS = 400
CHECKED = (2, 3, 4, 8, 16, 32, 64)
"""Steps (after the first) on which the op watch follows every statement of the loop."""
VARIANTS = {
    "untraced": "untraced",
    "noop": "a no-op line tracer (the floor)",
    "": "ShapeLens (the default)",
    "reads": "reads off",
    "op_watch": "op watch off",
    "modules": "module tree off",
    "reads,op_watch,modules": "reads, op watch and module tree off",
}
"""Variant → its column: ``SHAPELENS_OFF`` for the traced ones."""
COMPARED = [variant for variant in VARIANTS if variant != "untraced"]


def _training() -> tuple[Any, ...]:
    import torch

    torch.set_num_threads(1)
    torch.manual_seed(0)
    model, x, y = mlp(torch)
    return model, x, y, torch.optim.SGD(model.parameters(), lr=0.01), torch.nn.MSELoss()


def warmed_training(folder: str) -> tuple[Any, ...]:
    """``(train, model, x, y, optimizer, loss_fn)``: the loop as user code (a file in
    ``folder``, the scope's root), after a warm-up on a copy of its code outside the folder
    (torch's lazy imports and caches), so the measured code is new to the tracer, as in a
    run."""
    script = Path(folder) / "training.py"
    script.write_text(TRAINING)
    namespace: dict[str, Any] = {}
    exec(compile(TRAINING, str(script), "exec"), namespace)
    train = namespace["train"]
    model, x, y, optimizer, loss_fn = _training()
    warm_code = train.__code__.replace(co_filename=os.path.join(tempfile.gettempdir(), "w.py"))
    warm = type(train)(warm_code, namespace)
    for _ in range(2):
        warm(model, x, y, optimizer, loss_fn, STEPS, [])
    return train, model, x, y, optimizer, loss_fn


def one_run(variant: str) -> list[float]:
    """In this process: the loop once under ``variant``; each step's wall seconds."""
    from noop_tracer import install_noop_tracer

    from shapelens.engine.recording.scope import ScopeConfig
    from shapelens.engine.session import engine_for
    from shapelens.engine.switches import OFF_VARIABLE

    folder = tempfile.mkdtemp(prefix="shapelens-steps-")
    train, model, x, y, optimizer, loss_fn = warmed_training(folder)
    engine = None
    if variant == "noop":
        install_noop_tracer(folder + os.sep)
    elif variant != "untraced":
        os.environ[OFF_VARIABLE] = variant  # read when the engine is built
        engine = engine_for(ScopeConfig(root=folder), whole_program=True)
        engine.start()
    marks: list[float] = []
    start = time.perf_counter()
    try:
        train(model, x, y, optimizer, loss_fn, STEPS, marks)
    finally:
        if engine is not None:
            engine.stop()
        shutil.rmtree(folder, ignore_errors=True)
    return [later - earlier for earlier, later in zip([start, *marks], marks, strict=False)]


def spans(steps: int) -> list[tuple[str, list[int]]]:
    """(label, the 0-based indexes of its steps)."""
    checked = [s - 1 for s in CHECKED]
    return [
        ("step 1", [0]),
        (f"checked steps {', '.join(map(str, CHECKED))}", checked),
        ("other steps 2-64", [i for i in range(1, 64) if i not in checked]),
        ("steps 65-100", list(range(64, 100))),
        (f"steps 101-{steps}", list(range(100, steps))),
    ]


def fresh_runs(script: str, variants: list[str], rounds: int) -> dict[str, list[Any]]:
    """Each variant's results, one per round: ``script --one <variant>`` in a fresh process
    (as a run is), the variants alternating in order from round to round, each child's
    last line of output read as JSON."""
    runs: dict[str, list[Any]] = {variant: [] for variant in variants}
    for round_ in range(rounds):
        for variant in variants if round_ % 2 == 0 else list(reversed(variants)):
            command = [sys.executable, script, "--one", variant]
            done = subprocess.run(command, capture_output=True, text=True, check=True)
            runs[variant].append(json.loads(done.stdout.strip().splitlines()[-1]))
    return runs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--one", help=argparse.SUPPRESS)  # a measuring child: its variant
    options = parser.parse_args()
    if options.one is not None:
        print(json.dumps(one_run(options.one)))
        return 0
    runs: dict[str, list[list[float]]] = fresh_runs(__file__, list(VARIANTS), options.rounds)
    least = {v: [min(r[i] for r in rs) for i in range(STEPS)] for v, rs in runs.items()}
    base = least["untraced"]
    header = " | ".join(VARIANTS[v] for v in COMPARED)
    rows = [f"| steps | untraced (ms) | {header} |", "|---|" + "---:|" * len(VARIANTS)]
    for label, indexes in [*spans(STEPS), (f"all {STEPS} steps", list(range(STEPS)))]:
        untraced = sum(base[i] for i in indexes)
        cells = [f"{1e3 * sum(least[v][i] - base[i] for i in indexes):+.1f}" for v in COMPARED]
        rows.append(f"| {label} | {1e3 * untraced:.1f} | " + " | ".join(cells) + " |")
    total = sum(base)
    ratios = " | ".join(f"{sum(least[v]) / total:.2f}×" for v in COMPARED)
    rows.append(f"| ratio to untraced | 1.00× | {ratios} |")
    emit_table(
        f"Where over the run the tracing time goes (the MLP, {STEPS} steps, Python"
        f" {sys.version.split()[0]}): wall ms each span of steps adds over untraced, each step"
        f" the least of {options.rounds} fresh processes.",
        rows,
        options.out,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
