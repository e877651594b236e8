"""Notebook tracing's overhead: a training cell run in an IPython shell, untraced and under
``%load_ext shapelens``, alternating in one process (``%shapelens off`` / ``on``).

Reported per interpreter: the least CPU time of each over the rounds, and their ratio.
Usage: python bench/notebook.py [--python PY ...] [--rounds N] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import textwrap
from pathlib import Path

from report import emit_table  # bench/ is on sys.path: these scripts run as files

SETUP_CELL = """\
import torch
torch.set_num_threads(1)  # idle OpenMP workers would add CPU time that is not tracing
torch.manual_seed(0)
model = torch.nn.Sequential(
    torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 64), torch.nn.ReLU(),
    torch.nn.Linear(64, 4),
)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
loss_fn = torch.nn.MSELoss()
x = torch.randn(32, 32)
y = torch.randn(32, 4)
"""
TRAINING_CELL = """\
for step in range(400):
    optimizer.zero_grad()
    pred = model(x)
    loss = loss_fn(pred, y)
    loss.backward()
    optimizer.step()
"""

PROBE = textwrap.dedent(
    """
    import json, os, sys, tempfile, time
    from IPython.core.interactiveshell import InteractiveShell
    os.environ["SHAPELENS_TRACE_DIR"] = tempfile.mkdtemp()
    shell = InteractiveShell.instance()
    setup, training, rounds = json.loads(sys.argv[1])
    shell.run_cell(setup)
    shell.run_cell(training)  # warm-up: lazy imports, allocator
    shell.run_cell("%load_ext shapelens")
    times = {"untraced": [], "traced": []}
    for _ in range(rounds):
        for mode in ("untraced", "traced"):
            shell.run_cell("%shapelens " + ("on" if mode == "traced" else "off"))
            start = time.process_time()
            result = shell.run_cell(training)
            times[mode].append(time.process_time() - start)
            assert result.success, result.error_in_exec
    print("RESULT " + json.dumps(times))
    """
)


def measure(python: str, rounds: int) -> dict[str, list[float]]:
    done = subprocess.run(
        [python, "-c", PROBE, json.dumps([SETUP_CELL, TRAINING_CELL, rounds])],
        capture_output=True,
        text=True,
        check=True,
        timeout=900,
    )
    line = next(x for x in done.stdout.splitlines() if x.startswith("RESULT "))
    times: dict[str, list[float]] = json.loads(line.removeprefix("RESULT "))
    return times


def _version(python: str) -> str:
    done = subprocess.run([python, "--version"], capture_output=True, text=True, check=True)
    return done.stdout.split()[-1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--python", action="append", default=None)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--out", type=Path)
    options = parser.parse_args()
    rows = [
        "| python | untraced cell (CPU s) | `%load_ext shapelens` | ratio |",
        "|---|---:|---:|---:|",
    ]
    for python in options.python or [sys.executable]:
        times = measure(python, options.rounds)
        untraced, traced = min(times["untraced"]), min(times["traced"])
        rows.append(
            f"| {_version(python)} | {untraced:.3f} | {traced:.3f} | {traced / untraced:.2f}× |"
        )
    emit_table(
        "Notebook cells: a 400-step MLP training loop as a cell in an IPython shell,"
        " untraced and traced (`%load_ext shapelens`), alternating in one process;"
        f" least CPU time of {options.rounds} rounds.",
        rows,
        options.out,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
