"""The trace data model, kept apart from its presenters (JSON codec, listing, LSP).

Line numbers are 1-based, file paths absolute. Every field mirrors the JSON format
documented in ``docs/trace-format.md``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

# The finding records are defined once, in trace/finding.py (the child imports them there).
from shapelens.trace.finding import (
    CauseStep as CauseStep,
)
from shapelens.trace.finding import (
    Facts as Facts,
)
from shapelens.trace.finding import (
    Finding as Finding,
)
from shapelens.trace.finding import (
    FindingKind as FindingKind,
)
from shapelens.trace.finding import (
    Join as Join,
)
from shapelens.trace.finding import (
    MemoryFacts as MemoryFacts,
)
from shapelens.trace.finding import (
    ModuleFacts as ModuleFacts,
)
from shapelens.trace.finding import (
    Operand as Operand,
)
from shapelens.trace.finding import (
    RankCall as RankCall,
)
from shapelens.trace.finding import (
    RelatedLocation as RelatedLocation,
)
from shapelens.trace.finding import (
    Severity as Severity,
)
from shapelens.trace.finding import (
    StackFrame as StackFrame,
)
from shapelens.trace.messages import SIMULATED_PREFIX

# "running" only marks live snapshots handed to an editor during a run; never written.
RunStatus = Literal["ok", "exception", "exit", "timeout", "crashed", "shape_only_stop", "running"]
CompileMode = Literal["eager", "compiled"]


@dataclass(frozen=True, kw_only=True)
class RankValue:
    """One rank's last value of a variable in a distributed run."""

    rank: int
    shape: tuple[int, ...] | None
    dtype: str | None
    device: str | None
    requires_grad: bool | None
    hits: int
    local_shape: tuple[int, ...] | None = None
    """A sharded tensor: this rank's shard."""


@dataclass(frozen=True, kw_only=True)
class TracedVar:
    """One variable (or container entry) bound on one line, aggregated over all hits."""

    name: str
    type: str
    shape: tuple[int, ...] | None
    dtype: str | None
    device: str | None
    requires_grad: bool | None
    hits: int
    shapes: tuple[tuple[int, ...], ...]
    grad_fn: str | None = None
    dim_ranges: tuple[tuple[int, int], ...] | None = None
    """Each dim's (min, max) over every shape read; None when the number of dims varied."""
    number: tuple[float, float, float] | None = None
    """A Python int, float or bool: (last, min, max) of the values read."""
    history: tuple[float, ...] = ()
    """A scalar's values (a Python number, a 0-dim CPU tensor) over the run, downsampled."""
    shape_hits: tuple[int, ...] = ()
    """When the shape varied: the hits of each of ``shapes``, in the same order."""
    grad_varied: bool = False
    """requires_grad was True on some hits and False on others (``requires_grad``: the last)."""
    ranks: tuple[RankValue, ...] = ()
    """Per-rank values of a distributed run (empty for a single process)."""
    bounded_dims: tuple[int, ...] = ()
    """A shape-only run: the dims whose size depends on the data (a boolean mask's
    selection), written at their bound: ``(≤32,8)``."""
    placements: str | None = None
    """A sharded tensor (DTensor): how it is laid out over the ranks (``Shard(0)``);
    ``shape`` is its global shape."""
    local_shape: tuple[int, ...] | None = None
    """A sharded tensor: this rank's shard (``(32,32)`` of a ``(64,32)`` ``Shard(0)``)."""

    @property
    def shape_varies(self) -> bool:
        return len(self.shapes) > 1

    @property
    def simulated(self) -> bool:
        """A number a shape-only run stood in for a tensor's value (``loss.item()``)."""
        return self.type.startswith(SIMULATED_PREFIX)


@dataclass(frozen=True, kw_only=True)
class TracedLine:
    """One executed line of user code: how often it ran and what it bound."""

    file: str
    line: int
    hits: int
    vars: tuple[TracedVar, ...] = ()
    sampled: bool = False
    """Events were switched off after ``hits`` hits: counts are lower bounds."""


@dataclass(frozen=True, kw_only=True)
class SourceLocation:
    file: str
    line: int


@dataclass(frozen=True, kw_only=True)
class TensorSlot:
    """One tensor argument or result of a module, over all its calls."""

    shape: tuple[int, ...] | None
    """The last shape."""
    dim_ranges: tuple[tuple[int, int], ...] | None = None
    """Each dim's (min, max) when the shape varied (with a fixed number of dims)."""
    dtype: str | None = None
    device: str | None = None


@dataclass(frozen=True, kw_only=True)
class ModuleCall:
    """One ``nn.Module`` of the run and what went through it (``modules`` in the file)."""

    path: str
    """From its root: ``transformer.h.0.attn``; ``""`` for a root."""
    cls: str
    params: int
    trainable_params: int
    calls: int
    calls_sampled: bool = False
    """``calls`` is partly estimated: the tree stopped watching while nothing changed."""
    inputs: tuple[TensorSlot, ...] = ()
    outputs: tuple[TensorSlot, ...] = ()
    declared: SourceLocation | None = None
    """``self.attn = ...`` in the user's class that holds it (None for a root)."""
    forward: SourceLocation | None = None
    """Its class's ``forward``."""
    rank: int | None = None
    """Distributed runs: the rank it ran on."""
    shard_bytes: int | None = None
    """Sharded parameters (FSDP2, DTensor): the bytes of them this rank holds; ``params``
    counts them whole (globally)."""
    cost: ModuleCost | None = None
    """A shape-only run's memory and FLOPs of its latest forward (its children's included)."""


@dataclass(frozen=True, kw_only=True)
class ModuleCost:
    param_bytes: int
    activation_bytes: int
    """Storages its forward made while autograd recorded (what it may keep for backward)."""
    flops: int
    """FLOPs of its forward (torch's FlopCounterMode formulas)."""
    backward_flops: int = 0
    """FLOPs of the backward through that forward (0 in traces written before it)."""
    grad_bytes: int = 0
    """Its parameters' gradients, as they are now."""
    optimizer_state_bytes: int = 0
    """The optimizer's state for its parameters after the latest step (AdamW: two moments)."""


@dataclass(frozen=True, kw_only=True)
class ExceptionInfo:
    """The exception that ended the run, located at its innermost line of user code."""

    type: str
    message: str
    file: str | None
    line: int | None


@dataclass(frozen=True)
class ShapeOnlyRun:
    """A run on fake tensors (``shape_only`` in the file)."""

    simulated_cuda: bool
    """torch had no CUDA: ``cuda`` tensors lived on ``meta`` and are shown as ``cuda:0``."""
    simulated: tuple[SimulatedLine, ...] = ()
    """Where the program read values the run stood in for (``loss.item()``), line by line."""

    @property
    def simulated_values(self) -> int:
        """How many values the run stood in for: those read and those decided on."""
        return sum(s.values + s.decisions for s in self.simulated)


@dataclass(frozen=True, kw_only=True)
class SimulatedLine:
    """One line's stand-in values in a shape-only run (``shape_only.simulated``)."""

    file: str
    line: int
    values: int
    """Values read (``.item()``, ``float()``, formatting, printing a tensor)."""
    decisions: int
    """Decisions taken on simulated values (``if``/``while`` on a tensor, comparing one)."""


@dataclass(frozen=True, kw_only=True)
class CellSource:
    """A notebook cell as a kernel last executed it (``cells`` in a kernel session's trace):
    editors place its lines by matching ``source`` to the cells they show."""

    file: str
    """The name the kernel compiled the cell under: the ``file`` of its lines and findings."""
    source: str
    execution_count: int | None
    executed_at: float
    """Unix time at the end of that execution: the latest execution of a cell wins."""


@dataclass(frozen=True, kw_only=True)
class LineCost:
    """A line's memory and compute in a shape-only run (bytes and FLOPs, never rounded)."""

    file: str
    line: int
    device: str
    born_bytes: int
    """Storages its latest hit made (a view is free, a shared storage counts once)."""
    live_after: int
    """Live tensor bytes on the device after the line's last op."""
    peak_bytes: int
    """The most live bytes on the device while it ran (a backward, an optimizer step)."""
    flops: int
    """FLOPs of its latest hit (torch's FlopCounterMode formulas)."""
    flops_total: int


@dataclass(frozen=True, kw_only=True)
class DevicePeak:
    device: str
    peak_bytes: int
    file: str | None
    line: int | None
    breakdown: tuple[tuple[str, int], ...]
    """Live bytes at the peak by category: parameters, gradients, optimizer state,
    activations, other."""
    live_end: int
    module: str | None = None
    """The innermost module whose forward or backward made the peak (its dot path from its
    root, ``""`` for a root); None outside modules (an optimizer's step)."""
    module_class: str | None = None
    phase: str | None = None
    """``forward`` or ``backward`` (of ``module``)."""
    rank: int | None = None
    """A distributed shape-only run: the rank whose device this is (each holds its own)."""


@dataclass(frozen=True, kw_only=True)
class MemoryReport:
    flops: int
    budget_bytes: int | None
    devices: tuple[DevicePeak, ...]
    lines: tuple[LineCost, ...]

    def line_cost(self, file: str, line: int) -> LineCost | None:
        return next((c for c in self.lines if c.file == file and c.line == line), None)


@dataclass(frozen=True)
class TracingCore:
    """Which tracing core recorded a run (``shapelens doctor`` says which a run would get)."""

    core: str
    """"gate" (sys.settrace through the C gate), "settrace" or "monitoring"."""
    gate_off: str | None = None
    """Why settrace ran without its gate, where it did."""


@dataclass(frozen=True, kw_only=True)
class RankEnd:
    """How one rank of a distributed run ended (``ranks`` in the file)."""

    rank: int
    status: RunStatus
    exit_code: int
    signal: str | None
    """The signal that killed its process (``SIGKILL``, ``SIGABRT``), if one did (not the
    launcher's own stop)."""
    how: str
    """In words: ``ran to its end``, ``raised RuntimeError``, ``killed by SIGABRT in
    all_reduce``, ``stopped while waiting in barrier``."""
    file: str | None
    line: int | None
    """Its last line of user code: where it raised, died or waited."""
    collective: str | None = None
    """The collective it was in at its end."""


@dataclass(frozen=True, kw_only=True)
class Trace:
    argv: tuple[str, ...]
    python: str
    tracing: TracingCore | None = None
    """None in a trace from a notebook kernel or from before it was recorded."""
    duration_s: float
    status: RunStatus
    exit_code: int
    exception: ExceptionInfo | None = None
    lines: tuple[TracedLine, ...] = ()
    findings: tuple[Finding, ...] = ()
    # Human-readable detail about how the run ended (signal name, timeout), not in the schema core.
    detail: str | None = None
    modules: tuple[ModuleCall, ...] = ()
    """Every nn.Module called, each root followed by its descendants (tree order)."""
    compile_mode: CompileMode | None = None
    """How the program's torch.compile regions ran (``compile`` in the file): "eager" (the
    default: uncompiled, so their lines have hints), "compiled" (kept), None (none ran)."""
    shape_only: ShapeOnlyRun | None = None
    """Set when the run was on fake tensors (``--fake``): shapes, no values."""
    cells: tuple[CellSource, ...] = ()
    """A notebook kernel's trace: the cells whose lines it holds (empty for a script run)."""
    memory: MemoryReport | None = None
    """A shape-only run's memory and FLOPs, per line and per device."""
    ranks: tuple[RankEnd, ...] = ()
    """A distributed run: how and where each rank ended (empty for a single process)."""
    tracing_stopped: str | None = None
    """Why tracing stopped before the program ended (an error of ours inside a tracing
    callback: the program ran on untraced from there), where it did."""

    @property
    def files(self) -> list[str]:
        """Traced files in first-executed order."""
        return list(dict.fromkeys(line.file for line in self.lines))

    def lines_of(self, file: str) -> list[TracedLine]:
        return [line for line in self.lines if line.file == file]

    def findings_of(self, file: str) -> list[Finding]:
        return [f for f in self.findings if f.file == file]
