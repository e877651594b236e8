"""The tracing backends behind one protocol, and the one place that chooses among them.

The engine's assembly (:mod:`shapelens.engine.session`) builds the backend that
:func:`choose_backend` chooses, with :func:`build_backend`:

- ``sys.monitoring`` (:mod:`~shapelens.engine.backends.monitoring`) where the interpreter has it
  (3.12+), unless ``sys.settrace`` is asked for;
- else ``sys.settrace`` (:mod:`~shapelens.engine.backends.settrace`), through the C gate
  (:mod:`~shapelens.engine.backends.library_gate`) where it is built (CPython 3.11), unless
  ``SHAPELENS_LIBRARY_GATE=0`` is in the environment.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from typing import Literal, Protocol

from shapelens.engine.backends.library_gate import built_gate, why_no_gate
from shapelens.engine.backends.monitoring import MonitoringTracer
from shapelens.engine.backends.settrace import Tracer
from shapelens.engine.modules.tree import ReturnWatch
from shapelens.engine.recording.statement_recorder import StatementRecorder
from shapelens.settings.groups import BACKENDS

GATE_VARIABLE = "SHAPELENS_LIBRARY_GATE"
"""``0``: the ``sys.settrace`` backend without its C gate (plain ``sys.settrace``)."""

REQUESTS = BACKENDS
"""What a user may ask for (``shapelens run --backend``, declared with the settings);
"auto": the fastest there is."""


class TracingBackend(ReturnWatch, Protocol):
    """A tracing backend: follows the frames of user code and reports their events to a
    :class:`~shapelens.engine.recording.statement_recorder.StatementRecorder` (and the
    returns of one library code object to the module tree, as :class:`ReturnWatch`)."""

    def start(self) -> None:
        """Trace from here on: this thread, and threads started later."""

    def stop(self) -> None:
        """Stop tracing, and restore what was there before (another tool's tracer)."""

    def forked(self) -> None:
        """In a forked child of user code: tracing off there for good."""


class BackendUnavailable(Exception):
    """The backend asked for cannot run in this interpreter; the message follows the name
    asked for ("monitoring needs Python 3.12+ ...")."""


@dataclass(frozen=True)
class BackendChoice:
    kind: Literal["settrace", "monitoring"]
    gated: bool = False
    """settrace: through the C gate (where nothing traced before it starts)."""
    gate_off: str | None = field(default=None, compare=False)
    """settrace without the gate: why (``shapelens doctor`` says it); an explanation, not
    part of the choice."""

    @property
    def core(self) -> Literal["gate", "settrace", "monitoring"]:
        """The core's name in a trace and in ``shapelens doctor``."""
        return "gate" if self.gated else self.kind


def choose_backend(requested: str = "auto") -> BackendChoice:
    """The backend for ``requested`` (one of :data:`REQUESTS`) in this interpreter."""
    if requested not in REQUESTS:
        raise BackendUnavailable(f"{requested!r} is not one of {', '.join(REQUESTS)}")
    has_monitoring = hasattr(sys, "monitoring")
    if requested == "monitoring" and not has_monitoring:
        python = sys.version.split()[0]
        raise BackendUnavailable(f"monitoring needs Python 3.12+ (this is {python})")
    if has_monitoring and requested != "settrace":
        return BackendChoice("monitoring")
    if os.environ.get(GATE_VARIABLE, "1") == "0":
        return BackendChoice("settrace", gate_off=f"{GATE_VARIABLE}=0 is set")
    reason = why_no_gate()
    return BackendChoice("settrace", gated=reason is None, gate_off=reason)


def build_backend(
    events: StatementRecorder, choice: BackendChoice, *, sample_hits: int | None = None
) -> TracingBackend:
    """The backend ``choice`` names (from :func:`choose_backend`), for a caller that records
    which one ran."""
    if choice.kind == "monitoring":
        return MonitoringTracer(events, sample_hits=sample_hits)
    return Tracer(events, gate=built_gate() if choice.gated else None, sample_hits=sample_hits)
