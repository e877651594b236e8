"""``shapelens doctor``: what a user pastes into a bug report.

The interpreter a run would use is asked in a child process (:mod:`shapelens.runner.probe`:
its version, torch and CUDA, the tracing core and why the gate is off, debugpy and
ipykernel); this side adds ShapeLens's own version, whether the trace folders are writable
and, from the editor, its settings, and writes the report as text or JSON.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from shapelens import __version__
from shapelens.runner.launcher import UsageError, resolve_python
from shapelens.runner.probe import MINIMUM

_PROBE = str(Path(__file__).with_name("probe.py"))
PROBE_TIMEOUT_S = 120.0
"""``import torch`` takes seconds; CUDA initialisation on a busy machine, more."""


class Unusable(Exception):
    """The interpreter cannot run ShapeLens's child: the message is the one line to show."""


@dataclass(frozen=True)
class Diagnosis:
    shapelens: str
    interpreter: dict[str, Any]
    """The probe's answer (:mod:`shapelens.runner.probe`)."""
    trace_dirs: dict[str, str]
    """Each folder traces are written to or read from: writable, or why not."""
    settings: dict[str, Any] | None = None
    """The editor's effective ``shapelens.*`` settings, when it asks."""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def probe(python: str, env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Ask ``python`` (a path or a name on PATH) about itself; :class:`Unusable` when it is
    missing, too old or broken."""
    try:
        found = resolve_python(python)
    except UsageError as err:
        raise Unusable(str(err)) from None
    try:
        done = subprocess.run(
            [found, _PROBE],
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT_S,
            env=dict(os.environ if env is None else env),
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        raise Unusable(f"cannot run {found}: {err}") from None
    lines = done.stdout.strip().splitlines()
    try:  # the last line: torch may print before it
        answer: dict[str, Any] = json.loads(lines[-1]) if lines else {}
    except json.JSONDecodeError:
        answer = {}
    if done.returncode != 0 or not answer:
        error = (done.stderr.strip().splitlines() or ["no answer"])[-1]
        raise Unusable(f"{found} cannot run ShapeLens (exit {done.returncode}): {error}")
    if answer.get("too_old"):
        needed = ".".join(map(str, MINIMUM))
        raise Unusable(
            f"{found} is Python {answer['python']}: ShapeLens runs programs on Python "
            f"{needed} or newer (choose another with --python, or the extension's "
            "shapelens.interpreter setting)"
        )
    return answer


def writable(folder: str) -> str:
    """ "writable", "writable (created on first use)", or why not."""
    existing = Path(folder)
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        return f"not writable: {existing} is not a folder"
    if not os.access(existing, os.W_OK | os.X_OK):
        return f"not writable: no write permission on {existing}"
    return "writable" if existing == Path(folder) else "writable (created on first use)"


def diagnose(
    python: str,
    trace_dirs: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    settings: dict[str, Any] | None = None,
) -> Diagnosis:
    return Diagnosis(
        shapelens=__version__,
        interpreter=probe(python, env),
        trace_dirs={folder: writable(folder) for folder in trace_dirs},
        settings=settings,
    )


def _tracing_line(tracing: Mapping[str, Any]) -> str:
    core = tracing["core"]
    if core == "gate":
        return "gate (sys.settrace, off while library code runs: the C gate)"
    if core == "monitoring":
        return "monitoring (sys.monitoring, Python 3.12+; the gate is not needed)"
    return f"settrace (plain sys.settrace, slower); gate off: {tracing['gate_off']}"


def _torch_line(torch: Mapping[str, Any] | None) -> str:
    if torch is None:
        return "not installed"
    if "error" in torch:
        return f"fails to import: {torch['error']}"
    if not torch["cuda"]:
        return f"{torch['version']}, CUDA not available"
    devices = ", ".join(torch["devices"])
    return f"{torch['version']}, CUDA {torch['cuda_version']} available: {devices}"


def report(diagnosis: Diagnosis) -> str:
    """The report as text, one fact a line."""
    found = diagnosis.interpreter
    rows = [
        ("shapelens", diagnosis.shapelens),
        ("python", f"{found['implementation']} {found['python']} ({found['platform']})"),
        ("interpreter", found["executable"]),
        ("torch", _torch_line(found["torch"])),
        ("tracing core", _tracing_line(found["tracing"])),
        ("debugpy", found["debugpy"] or "not installed (debugging with hints needs it)"),
        ("ipykernel", found["ipykernel"] or "not installed (notebooks need it)"),
    ]
    rows += [("trace folder", f"{path}: {state}") for path, state in diagnosis.trace_dirs.items()]
    width = max(len(name) for name, _ in rows)
    lines = [f"{name.ljust(width)}  {value}" for name, value in rows]
    if diagnosis.settings is not None:
        lines.append("settings (effective shapelens.*):")
        shown = json.dumps(diagnosis.settings, indent=2, sort_keys=True)
        lines += [f"  {line}" for line in shown.splitlines()]
    return "\n".join(lines) + "\n"
