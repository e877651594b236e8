"""The messages of the child→parent channel: one JSON object per frame, ``"t"`` its kind.

  hello     {python, pid}                      first message
  lines     {entries: [[file, line, hits], ...]}                 absolute counts, idempotent
  vars      {entries: [[file, line, name, type, shape, dtype, device, requires_grad,
                        hits, shapes, grad_fn, dim_ranges, number, history,
                        shape_hits, grad_varied], ...]}
  sampled   {entries: [[file, line], ...]}     every line whose events were switched off
  findings  {entries: [finding, ...]}          appended
  compile   {mode}                             how torch.compile regions ran ("eager", ...)
  shape_only {simulated_cuda}                  the run is on fake tensors (``--fake``)
  modules   {entries: [module, ...]}           every nn.Module called so far (trace format's
                                               ``modules``), re-sent whole when calls happened
  debug     {host, port}                       debugpy listens there, waiting for a client
  error     {message}                          the target could not be started
  stopped   {}                                 answer to a stop request on the control pipe
  end       {status, exit_code, exception, ended_at}     the run finished (normally or not)

Aggregates are re-sent whole when they change, so losing the tail of the stream to a crash
loses at most the last flush interval. The child (``runner/child.py``) and its recorder
(``engine/recorder.py``) write them with the constructors below; the parent's
:class:`~shapelens.trace.builder.TraceBuilder` reads them by the same kinds. Here, in the
trace package, because both the engine and the trace builder need the names and the engine
must not import the runner. Standard library only: the child imports it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Final, Literal, TypedDict

HELLO: Final = "hello"
LINES: Final = "lines"
VARS: Final = "vars"
SAMPLED: Final = "sampled"
FINDINGS: Final = "findings"
COMPILE: Final = "compile"
SHAPE_ONLY: Final = "shape_only"
MODULES: Final = "modules"
DEBUG: Final = "debug"
ERROR: Final = "error"
STOPPED: Final = "stopped"
END: Final = "end"

RESULTS: Final = frozenset({LINES, VARS, FINDINGS, MODULES})
"""Kinds that bring new results (a snapshot of a running trace is worth sending)."""

VAR_FIELDS: Final = (
    "file", "line", "name", "type", "shape", "dtype", "device", "requires_grad", "hits",
    "shapes", "grad_fn", "dim_ranges", "number", "history", "shape_hits", "grad_varied",
)  # fmt: skip
"""The order of a ``vars`` entry's fields."""


class Hello(TypedDict):
    t: Literal["hello"]
    python: str
    pid: int


class Lines(TypedDict):
    t: Literal["lines"]
    entries: list[list[Any]]


class Vars(TypedDict):
    t: Literal["vars"]
    entries: list[list[Any]]


class Sampled(TypedDict):
    t: Literal["sampled"]
    entries: list[list[Any]]


class Findings(TypedDict):
    t: Literal["findings"]
    entries: list[dict[str, Any]]


class Compile(TypedDict):
    t: Literal["compile"]
    mode: str | None


class Modules(TypedDict):
    t: Literal["modules"]
    entries: list[dict[str, Any]]


class Debug(TypedDict):
    t: Literal["debug"]
    host: str
    port: int


class Error(TypedDict):
    t: Literal["error"]
    message: str


class Stopped(TypedDict):
    t: Literal["stopped"]


class ExceptionRecord(TypedDict):
    type: str
    message: str
    file: str | None
    line: int | None


class End(TypedDict):
    t: Literal["end"]
    status: str
    exit_code: int
    exception: ExceptionRecord | None
    ended_at: float
    """Wall clock: orders failing ranks, the first is the cause."""


class ShapeOnly(TypedDict):
    t: Literal["shape_only"]
    simulated_cuda: bool


Message = (
    Hello
    | Lines
    | Vars
    | Sampled
    | Findings
    | Compile
    | ShapeOnly
    | Modules
    | Debug
    | Error
    | Stopped
    | End
)


def json_number(value: Any) -> Any:
    """A number JSON carries: NaN and infinities as the strings ``nan``, ``inf``, ``-inf``."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value


def read_numbers(values: Any) -> tuple[float, ...]:
    """Numbers written by :func:`json_number`, back as numbers."""
    return tuple(float(v) if isinstance(v, str) else v for v in values)


def hello(*, python: str, pid: int) -> Hello:
    return {"t": HELLO, "python": python, "pid": pid}


def lines(entries: list[list[Any]]) -> Lines:
    return {"t": LINES, "entries": entries}


def vars_(entries: list[list[Any]]) -> Vars:
    return {"t": VARS, "entries": entries}


def sampled(entries: list[list[Any]]) -> Sampled:
    return {"t": SAMPLED, "entries": entries}


def findings(entries: Sequence[dict[str, Any]]) -> Findings:
    return {"t": FINDINGS, "entries": list(entries)}


def compile_mode(mode: str | None) -> Compile:
    return {"t": COMPILE, "mode": mode}


def shape_only(*, simulated_cuda: bool) -> ShapeOnly:
    return {"t": SHAPE_ONLY, "simulated_cuda": simulated_cuda}


def modules(entries: list[dict[str, Any]]) -> Modules:
    return {"t": MODULES, "entries": entries}


def debug(*, host: str, port: int) -> Debug:
    return {"t": DEBUG, "host": host, "port": port}


def error(message: str) -> Error:
    return {"t": ERROR, "message": message}


def stopped() -> Stopped:
    return {"t": STOPPED}


def end(*, status: str, exit_code: int, exception: ExceptionRecord | None, ended_at: float) -> End:
    return {
        "t": END,
        "status": status,
        "exit_code": exit_code,
        "exception": exception,
        "ended_at": ended_at,
    }
