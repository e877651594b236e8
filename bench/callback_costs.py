"""What each of ShapeLens's ``sys.monitoring`` callbacks costs in a run (Python 3.12+): the
MLP's 400 training steps (`step_costs.py`'s loop), each callback timed where it runs, by the
event and the place it reports (a line of the loop, a user call site, torch's code).

A callback's time is measured inside it (its own work, the interpreter's dispatch to it not
counted), by wrapping each callback the backend registers; the wrappers' own cost is not in
the whole overhead's column, which comes from runs without them. Each measurement is a fresh
process, as a run is; medians of the rounds. What the callbacks do not account for runs in
torch's calls: the op watch's torch function mode on checked hits, and whatever our work
costs torch's own code afterwards (caches).

Usage: python bench/callback_costs.py [--rounds N] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from report import emit_table  # bench/ is on sys.path: these scripts run as files
from step_costs import STEPS, TRAINING, fresh_runs, warmed_training

CALLBACKS = ("_on_start", "_on_return", "_on_call", "_on_yield", "_on_raise", "_on_unwind")
EVENTS = {
    "_on_start": "PY_START",
    "_on_return": "PY_RETURN",
    "_on_call": "CALL",
    "_on_yield": "PY_YIELD",
    "_on_raise": "RAISE",
    "_on_unwind": "PY_UNWIND",
}
SHOWN = 12
"""Rows of the table: the costliest places (the rest are summed in one row)."""
EARLY = 100
"""A place's first calls, counted apart from the later ones: a loop's first steps are read
densely and checked by the op watch; the later ones show what a long run pays per step."""


class _FrameDepth:
    """The ``sys`` the backend module sees while wrapped: ``_getframe(n)`` skips the
    wrapper's frame, so the callback still finds the frame the event is about."""

    def __getattr__(self, name: str) -> Any:
        return getattr(sys, name)

    @staticmethod
    def _getframe(depth: int = 0) -> Any:
        return sys._getframe(depth + 2)  # this function's frame and the wrapper's


def _wrap_callbacks(spent: Counter[str], calls: Counter[str], folder: str) -> None:
    """Time each callback of :class:`MonitoringTracer` into ``spent`` (ns) by place."""
    from shapelens.engine.backends import monitoring

    clock = time.perf_counter_ns
    tracer = monitoring.MonitoringTracer
    monitoring.sys = _FrameDepth()  # type: ignore[assignment]
    line_callback = tracer._line_callback

    def timed_lines(self: Any) -> Callable[[Any, int], Any]:
        on_line = line_callback(self)

        def timed(code: Any, line: int) -> Any:
            start = clock()
            result = on_line(code, line)
            end = clock()
            key = f"LINE|{_place(code, folder)}:{line}"
            _count(spent, calls, key, end - start)
            return result

        return timed

    tracer._line_callback = timed_lines  # type: ignore[method-assign]
    for name in CALLBACKS:
        callback = getattr(tracer, name)

        def timed_event(self: Any, code: Any, *args: Any, _callback: Any = callback,
                        _event: str = EVENTS[name]) -> Any:  # fmt: skip
            start = clock()
            result = _callback(self, code, *args)
            end = clock()
            key = f"{_event}|{_place(code, folder)}:{code.co_name}"
            _count(spent, calls, key, end - start)
            return result

        setattr(tracer, name, timed_event)


def _count(spent: Counter[str], calls: Counter[str], key: str, ns: int) -> None:
    """One call of ``key``'s callback: into its first :data:`EARLY` calls, or the later."""
    calls[key] += 1
    spent[key] += ns
    if calls[key] > EARLY:
        spent[f"{key}|later"] += ns
        calls[f"{key}|later"] += 1


def _place(code: Any, folder: str) -> str:
    """The training script by its name, other code by its file's last two parts."""
    path = code.co_filename
    if path.startswith(folder):
        return "training.py"
    return "/".join(Path(path).parts[-2:])


def one_run(variant: str) -> dict[str, Any]:
    """In this process: the loop once, untraced, traced, or traced with timed callbacks."""
    from shapelens.engine.recording.scope import ScopeConfig
    from shapelens.engine.session import engine_for

    folder = tempfile.mkdtemp(prefix="shapelens-callbacks-")
    train, model, x, y, optimizer, loss_fn = warmed_training(folder)
    spent: Counter[str] = Counter()
    calls: Counter[str] = Counter()
    if variant == "timed":
        _wrap_callbacks(spent, calls, folder + os.sep)
    engine = None
    if variant != "untraced":
        engine = engine_for(ScopeConfig(root=folder), whole_program=True)
        engine.start()
    start = time.process_time()
    try:
        train(model, x, y, optimizer, loss_fn, STEPS, [])
        cpu = time.process_time() - start
    finally:
        if engine is not None:
            engine.stop()
        shutil.rmtree(folder, ignore_errors=True)
    return {"cpu": cpu, "spent": dict(spent), "calls": dict(calls)}


def _label(key: str) -> tuple[str, str]:
    """(event, where): a line of the loop with its text, else the code's name."""
    event, place = key.split("|", 1)
    if event == "LINE":
        line = int(place.rsplit(":", 1)[1])
        text = TRAINING.splitlines()[line - 1].strip() if line <= len(TRAINING.splitlines()) else ""
        return event, f"line {line} `{text}`"
    where, name = place.rsplit(":", 1)
    return event, f"{name} ({where})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--one", help=argparse.SUPPRESS)  # a measuring child: its variant
    options = parser.parse_args()
    if sys.version_info < (3, 12):
        print("callback_costs.py measures the sys.monitoring backend: Python 3.12+")
        return 0
    if options.one is not None:
        print(json.dumps(one_run(options.one)))
        return 0
    runs = fresh_runs(__file__, ["untraced", "traced", "timed"], options.rounds)
    untraced = statistics.median(run["cpu"] for run in runs["untraced"])
    traced = statistics.median(run["cpu"] for run in runs["traced"])
    keys = {key for run in runs["timed"] for key in run["spent"]}
    spent = {k: statistics.median(r["spent"].get(k, 0) for r in runs["timed"]) for k in keys}
    calls = {k: statistics.median(r["calls"].get(k, 0) for r in runs["timed"]) for k in keys}
    places = [key for key in keys if not key.endswith("|later")]
    ranked = sorted(places, key=lambda key: -spent[key])
    rows = [
        f"| event | where | calls | ms | µs a call, its first {EARLY} | µs a call, the later |"
        " share of the overhead |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    overhead_ms = 1000 * (traced - untraced)
    for key in ranked[:SHOWN]:
        event, where = _label(key)
        ms = spent[key] / 1e6
        later_ns, later_calls = spent.get(f"{key}|later", 0), calls.get(f"{key}|later", 0)
        early = (spent[key] - later_ns) / max(calls[key] - later_calls, 1) / 1000
        later = f"{later_ns / later_calls / 1000:.1f}" if later_calls else ""
        rows.append(
            f"| {event} | {where} | {calls[key]:.0f} | {ms:.2f} | {early:.1f} | {later} | "
            f"{ms / overhead_ms:.0%} |"
        )
    rest = sum(spent[key] for key in ranked[SHOWN:]) / 1e6
    rest_calls = sum(calls[key] for key in ranked[SHOWN:])
    rows.append(
        f"| (the others) | | {rest_calls:.0f} | {rest:.2f} | | | {rest / overhead_ms:.0%} |"
    )
    in_callbacks = sum(spent[key] for key in places) / 1e6
    all_calls = sum(calls[key] for key in places)
    rows.append(
        f"| **all callbacks** | | {all_calls:.0f} | {in_callbacks:.2f} | | | "
        f"{in_callbacks / overhead_ms:.0%} |"
    )
    rows.append(
        f"| **the whole overhead** | untraced {1000 * untraced:.1f} ms, traced "
        f"{1000 * traced:.1f} ms ({traced / untraced:.2f}×) | | {overhead_ms:.2f} | | | 100% |"
    )
    emit_table(
        f"What each sys.monitoring callback costs (Python {sys.version.split()[0]}): the MLP's"
        f" {STEPS} steps, ms inside each callback (wall clock, one thread) by event and place,"
        f" medians of {options.rounds} fresh processes; the whole overhead from runs without the"
        " timing. The rest of it runs inside torch's calls (the op watch's mode on checked hits,"
        " and torch's own code running slower after ours).",
        rows,
        options.out,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
