"""Where the char-level GPT's tracing time goes, in one process (no start-up, no noise from
importing torch): its whole `main()` (datasets, 60 AdamW steps through a DataLoader, the
evaluation) untraced; under the engine as `shapelens run` assembles it; the same with each
mechanism switched off (`SHAPELENS_OFF`); under a line tracer of the script's code that does
nothing (the floor any line tracer pays: `sys.settrace`, or a `sys.monitoring` tool).
Interleaved, least and median of N rounds. Each traced round builds a fresh engine and runs
the script's code anew, as a run does (its code objects are new to the engine).

Usage: python bench/program_floor.py [--rounds N] [--out FILE]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import runpy
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

from noop_tracer import install_noop_tracer, remove_noop_tracer
from report import emit_table  # bench/ is on sys.path: these scripts run as files

from shapelens.engine.backends.choice import choose_backend
from shapelens.engine.recording.scope import ScopeConfig
from shapelens.engine.session import Engine, EngineConfig
from shapelens.engine.switches import OFF_VARIABLE
from shapelens.settings.options import RunOptions

PROGRAM = Path(__file__).resolve().parent / "programs" / "char_gpt"
SWITCHED = {
    "reads": "reading statements' values",
    "op_watch": "the op watch",
    "modules": "the module tree",
}


def run_script() -> float:
    """The script's `__main__` once; its CPU time (stdout kept out of the report)."""
    sys.argv = ["train.py"]
    start = time.process_time()
    with contextlib.redirect_stdout(io.StringIO()):
        runpy.run_path(str(PROGRAM / "train.py"), run_name="__main__")
    return time.process_time() - start


def traced(off: str = "") -> float:
    os.environ[OFF_VARIABLE] = off  # read when the engine is built
    try:
        engine = Engine(
            EngineConfig(
                scope=ScopeConfig(root=str(PROGRAM)), options=RunOptions(), backend=choose_backend()
            )
        )
    finally:
        os.environ.pop(OFF_VARIABLE, None)
    engine.start()
    try:
        return run_script()
    finally:
        engine.stop()
        engine.close()


def under_noop() -> float:
    install_noop_tracer(str(PROGRAM) + os.sep)
    try:
        return run_script()
    finally:
        remove_noop_tracer()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--out", type=Path)
    options = parser.parse_args()
    sys.path.insert(0, str(PROGRAM))  # the script imports its model as its own folder's
    import torch

    torch.set_num_threads(1)
    backend = f"sys.{choose_backend().kind}"
    variants: dict[str, Callable[[], float]] = {
        "untraced": run_script,
        f"a no-op line tracer ({backend}): the floor": under_noop,
        "ShapeLens (the default)": traced,
        **{
            f"ShapeLens, {label} off": (lambda n=name: traced(n))
            for name, label in SWITCHED.items()
        },
    }
    run_script()  # warm-up: torch's lazy imports (torch._dynamo, with the first optimizer)
    traced()
    times: dict[str, list[float]] = {name: [] for name in variants}
    for round_ in range(options.rounds):
        order = list(variants.items())
        for name, run in order if round_ % 2 == 0 else reversed(order):
            times[name].append(run())
    base = min(times["untraced"])
    rows = ["| run | least CPU s | median CPU s | vs untraced (least) |", "|---|---:|---:|---:|"]
    rows += [
        f"| {name} | {min(t):.3f} | {statistics.median(t):.3f} | {min(t) / base:.2f}× |"
        for name, t in times.items()
    ]
    emit_table(
        f"Where the char-level GPT's tracing time goes (Python {sys.version.split()[0]}, "
        f"{backend}): its `main()` in one process, start-up excluded, least and median "
        f"of {options.rounds} interleaved rounds.",
        rows,
        options.out,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
