"""The messages of the child→parent channel: one JSON object per frame, ``"t"`` its kind.

  hello     {python, pid, core, gate_off}      first message
  lines     {entries: [LineRecord, ...]}       absolute counts, idempotent
  vars      {entries: [VarRecord, ...]}        one per (file, line, name) that changed
  sampled   {entries: [SampledRecord, ...]}    every line whose events were switched off
  findings  {entries: [finding, ...]}          appended
  compile   {mode}                             how torch.compile regions ran ("eager", ...)
  shape_only {simulated_cuda}                  the run is on fake tensors (``--fake``)
  memory    {report}                           the trace format's ``memory``, re-sent whole
  simulated {entries: [SimulatedRecord, ...]}  a shape-only run's stand-in values per line,
                                               re-sent whole
  modules   {entries: [module, ...]}           every nn.Module called so far (trace format's
                                               ``modules``), re-sent whole when calls happened
  collectives {rank, entries: [CollectiveRecord, ...]}  a rank's latest collective calls
                                               (by group and sequence number), as they change
  position  {stack: [[file, line, function], ...], inside}  where a rank's main thread is
                                               in user code (innermost first) and in torch
                                               code that may wait on other ranks, at flushes
  debug     {host, port}                       debugpy listens there, waiting for a client
  error     {message}                          the target could not be started
  fault     {message}                          tracing stopped early: an error of ours
                                               inside a tracing callback (the program ran
                                               on untraced)
  stopped   {}                                 answer to a stop request on the control pipe
  end       {status, exit_code, exception, ended_at}     the run finished (normally or not)

The records are named tuples: on the wire each is a JSON array whose order is its class's
field order, so the frames stay compact and both sides read fields by name, from this one
definition: :func:`read_record` takes an array back (also a shorter one that a child of an
older ShapeLens wrote), :func:`field_reader` reads a few of its fields in place.

Aggregates are re-sent whole when they change, so losing the tail of the stream to a crash
loses at most the last flush interval. The child (``runner/child.py``) and its records
(``engine/recording/run_records.py``) write them with the constructors below; the parent's
:class:`~shapelens.trace.builder.TraceBuilder` reads them by the same kinds. Here, in the
trace package, because both the engine and the trace builder need the names and the engine
must not import the runner. Standard library only: the child imports it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from operator import itemgetter
from typing import Any, Final, Literal, NamedTuple, TypedDict, TypeVar

HELLO: Final = "hello"
LINES: Final = "lines"
VARS: Final = "vars"
SAMPLED: Final = "sampled"
FINDINGS: Final = "findings"
COMPILE: Final = "compile"
SHAPE_ONLY: Final = "shape_only"
MEMORY: Final = "memory"
SIMULATED: Final = "simulated"
MODULES: Final = "modules"
COLLECTIVES: Final = "collectives"
POSITION: Final = "position"
DEBUG: Final = "debug"
ERROR: Final = "error"
FAULT: Final = "fault"
STOPPED: Final = "stopped"
END: Final = "end"

SIMULATED_PREFIX: Final = "simulated "
"""Starts the type of a value a shape-only run simulated (``simulated float``): the child
names it so, the presentation reads it."""

RESULTS: Final = frozenset({LINES, VARS, FINDINGS, MODULES, MEMORY, SIMULATED, COLLECTIVES})
"""Kinds that bring new results (a snapshot of a running trace is worth sending)."""


class LineRecord(NamedTuple):
    """A ``lines`` entry: how often a line ran so far."""

    file: str
    line: int
    hits: int


class VarRecord(NamedTuple):
    """A ``vars`` entry: everything known about one name bound on one line (the trace
    format's ``TracedVar``, with shapes and numbers as JSON carries them)."""

    file: str
    line: int
    name: str
    type: str
    shape: list[int] | None
    dtype: str | None
    device: str | None
    requires_grad: bool | None
    hits: int
    shapes: list[list[int]]
    grad_fn: str | None
    # Added later: a child of an older ShapeLens (a rank file written then) sends none.
    dim_ranges: list[list[int]] | None = None
    number: list[Any] | None = None
    """A Python number's [last, min, max], as :func:`json_number` writes them."""
    history: list[Any] | None = None
    shape_hits: list[int] | None = None
    grad_varied: bool = False
    bounded_dims: list[int] | None = None
    """A shape-only run: the dims whose size depends on the data, at their bound."""
    sharding: list[Any] | None = None
    """A sharded tensor (DTensor): [placements, this rank's local shape]; ``shape`` is the
    global one."""


class SimulatedRecord(NamedTuple):
    """A ``simulated`` entry: the values a shape-only run stood in for on one line (read by
    ``.item()``, ``float()``, printing) and the decisions taken on them (``if``, ``while``,
    comparing a simulated number)."""

    file: str
    line: int
    values: int
    decisions: int


INTERNAL_GROUP: Final = " (torch)"
"""Ends the ``group`` of a collective torch's own Python code made (FSDP2's all-gathers,
Join's shadow all-reduces): recorded, where a rank waits, but never compared across ranks,
since it may pair with a collective another rank makes in C++, which nothing records."""


class CollectiveRecord(NamedTuple):
    """A ``collectives`` entry: one collective a rank called (metadata only, no data)."""

    group: str
    """``world``, ``ranks 0,2`` (a ``new_group``), ``0→1`` (a send/recv pair)."""
    seq: int
    """Its number among this rank's calls on ``group``, from 1."""
    op: str
    """``all_reduce``; ``broadcast(src=0)`` where the root must agree too."""
    file: str | None
    line: int | None
    """The innermost line of user code that called it."""
    state: str
    """``waiting`` (under way), ``called`` (returned) or ``failed`` (raised)."""
    tensors: list[list[Any]]
    """Each tensor that must agree across ranks: [name, shape, dtype, device]."""
    started: float
    """Wall clock when it was called."""
    error: str | None = None
    stack: list[list[Any]] | None = None
    """Its stack through user code, innermost first: [file, line, function]."""


class SampledRecord(NamedTuple):
    """A ``sampled`` entry: a line whose events were switched off (its counts are lower
    bounds)."""

    file: str
    line: int


class Hello(TypedDict):
    t: Literal["hello"]
    python: str
    pid: int
    core: str
    """The tracing core that runs: "gate", "settrace" or "monitoring"."""
    gate_off: str | None
    """Why settrace runs without its gate, where it does."""


class Lines(TypedDict):
    t: Literal["lines"]
    entries: list[LineRecord]


class Vars(TypedDict):
    t: Literal["vars"]
    entries: list[VarRecord]


class Sampled(TypedDict):
    t: Literal["sampled"]
    entries: list[SampledRecord]


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


class Fault(TypedDict):
    t: Literal["fault"]
    message: str


class Stopped(TypedDict):
    t: Literal["stopped"]


class Collectives(TypedDict):
    t: Literal["collectives"]
    rank: int
    entries: list[CollectiveRecord]


class Position(TypedDict):
    t: Literal["position"]
    stack: list[list[Any]]
    inside: str | None
    """torch code it is in that may wait on the other ranks (``backward``), if any."""


Record = TypeVar("Record", LineRecord, VarRecord, SampledRecord, SimulatedRecord, CollectiveRecord)


def read_record(kind: type[Record], entry: Sequence[Any]) -> Record:
    """A record back from its wire array: missing trailing fields (an older child's) take
    their defaults, fields this ShapeLens does not know (a newer child's) are dropped."""
    return kind(*entry[: len(kind._fields)])


def field_reader(kind: type[Record], *names: str) -> Callable[[Sequence[Any]], Any]:
    """Reads the fields ``names`` of ``kind``, as a tuple, straight out of its wire array,
    building no record: for a reader that keeps only the latest of many entries."""
    return itemgetter(*(kind._fields.index(name) for name in names))


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


class Memory(TypedDict):
    t: Literal["memory"]
    report: dict[str, Any]


class Simulated(TypedDict):
    t: Literal["simulated"]
    entries: list[SimulatedRecord]


Message = (
    Hello
    | Lines
    | Vars
    | Sampled
    | Findings
    | Compile
    | ShapeOnly
    | Memory
    | Simulated
    | Modules
    | Collectives
    | Position
    | Debug
    | Error
    | Fault
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


def hello(*, python: str, pid: int, core: str, gate_off: str | None) -> Hello:
    return {"t": HELLO, "python": python, "pid": pid, "core": core, "gate_off": gate_off}


def lines(entries: list[LineRecord]) -> Lines:
    return {"t": LINES, "entries": entries}


def vars_(entries: list[VarRecord]) -> Vars:
    return {"t": VARS, "entries": entries}


def sampled(entries: list[SampledRecord]) -> Sampled:
    return {"t": SAMPLED, "entries": entries}


def findings(entries: Sequence[dict[str, Any]]) -> Findings:
    return {"t": FINDINGS, "entries": list(entries)}


def compile_mode(mode: str | None) -> Compile:
    return {"t": COMPILE, "mode": mode}


def shape_only(*, simulated_cuda: bool) -> ShapeOnly:
    return {"t": SHAPE_ONLY, "simulated_cuda": simulated_cuda}


def memory(report: dict[str, Any]) -> Memory:
    return {"t": MEMORY, "report": report}


def simulated(entries: list[SimulatedRecord]) -> Simulated:
    return {"t": SIMULATED, "entries": entries}


def modules(entries: list[dict[str, Any]]) -> Modules:
    return {"t": MODULES, "entries": entries}


def collectives(rank: int, entries: list[CollectiveRecord]) -> Collectives:
    return {"t": COLLECTIVES, "rank": rank, "entries": entries}


def position(stack: list[list[Any]], inside: str | None) -> Position:
    return {"t": POSITION, "stack": stack, "inside": inside}


def debug(*, host: str, port: int) -> Debug:
    return {"t": DEBUG, "host": host, "port": port}


def error(message: str) -> Error:
    return {"t": ERROR, "message": message}


def fault(message: str) -> Fault:
    return {"t": FAULT, "message": message}


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
