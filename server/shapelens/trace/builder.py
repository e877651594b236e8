"""Assembles a :class:`Trace` from channel messages and the way the child ended."""

from __future__ import annotations

import os
import re
import signal
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from shapelens.trace import (
    ExceptionInfo,
    Finding,
    Trace,
    TracedLine,
    TracedVar,
    messages,
)
from shapelens.trace.codec import (
    compile_mode_of,
    memory_from_json,
    module_from_json,
    read_number,
    shape_only_of,
)
from shapelens.trace.finding import Operand, RankCall, StackFrame, finding_from_json
from shapelens.trace.messages import (
    CollectiveRecord,
    LineRecord,
    SampledRecord,
    VarRecord,
    field_reader,
    read_record,
)
from shapelens.trace.model import (
    CompileMode,
    RunStatus,
    ShapeOnlyRun,
    SimulatedLine,
    TracingCore,
)
from shapelens.trace.rank_facts import RankFacts
from shapelens.trace.suppression import suppressed

TIMEOUT_EXIT_CODE = 124  # as timeout(1)
_CALLS_KEPT = 64
"""A rank's collective calls kept (as many as the rank keeps: engine/distributed)."""

_LINE_FIELDS = field_reader(LineRecord, "file", "line", "hits")
_VAR_KEY = field_reader(VarRecord, "file", "line", "name")
_SAMPLED_AT = field_reader(SampledRecord, "file", "line")


class TraceBuilder:
    def __init__(
        self, *, argv: list[str], on_debug: Callable[[str, int], None] | None = None
    ) -> None:
        self.argv = argv
        self.on_debug = on_debug
        self.python = ""
        self.tracing: TracingCore | None = None
        self._memory: dict[str, Any] | None = None
        self.error: str | None = None
        self.fault: str | None = None
        """Why tracing stopped early (a ``fault`` message), if it did."""
        self.stopped = False
        self.end: dict[str, Any] | None = None
        self._hits: dict[tuple[str, int], int] = {}
        self._vars: dict[tuple[str, int], dict[str, Sequence[Any]]] = {}
        """The latest wire array of each variable: most are replaced by a later flush, so
        each becomes a record only when the trace is built."""
        self._findings: list[dict[str, Any]] = []
        self._sampled: set[tuple[str, int]] = set()
        self._compile_mode: CompileMode | None = None
        self._shape_only: ShapeOnlyRun | None = None
        self._simulated: tuple[SimulatedLine, ...] = ()
        self._modules: list[dict[str, Any]] = []
        self.crash: dict[str, Any] | None = None
        self._changed = False
        self._rank: int | None = None
        self._calls: dict[tuple[str, int], CollectiveRecord] = {}
        self._position: list[list[Any]] = []
        self._inside: str | None = None

    def take_changed(self) -> bool:
        """Whether results arrived since the last call."""
        changed, self._changed = self._changed, False
        return changed

    def crash_report(self, text: str, root: str) -> None:
        """Locate a fatal signal from faulthandler's dump: the innermost frame under ``root``."""
        first = text.strip().splitlines()[0] if text.strip() else ""
        frames = re.findall(r'File "(.+?)", line (\d+) in ', text)
        if not first:
            return
        where = next(
            (
                (path, int(line))
                for path, line in frames
                if path.startswith(os.path.join(root, "")) and "site-packages" not in path
            ),
            (None, None),
        )
        message = first.removeprefix("Fatal Python error: ")
        self.crash = {"type": "FatalError", "message": message, "file": where[0], "line": where[1]}

    def accept(self, message: Mapping[str, Any]) -> None:
        """Take one channel message (:mod:`shapelens.trace.messages`); unknown kinds are
        ignored."""
        kind = message.get("t")
        self._changed = self._changed or kind in messages.RESULTS
        if kind == messages.LINES:
            for entry in message["entries"]:
                file, line, hits = _LINE_FIELDS(entry)
                self._hits[(file, line)] = hits
        elif kind == messages.VARS:
            for entry in message["entries"]:
                file, line, name = _VAR_KEY(entry)
                self._vars.setdefault((file, line), {})[name] = entry
        elif kind == messages.SAMPLED:
            self._sampled = {_SAMPLED_AT(entry) for entry in message["entries"]}
        elif kind == messages.FINDINGS:
            self._findings.extend(
                f for f in message["entries"] if not suppressed(f["kind"], f["file"], f["line"])
            )
        elif kind == messages.HELLO:
            self.python = str(message.get("python", ""))
            core = message.get("core")
            if isinstance(core, str):
                gate_off = message.get("gate_off")
                self.tracing = TracingCore(core, gate_off if isinstance(gate_off, str) else None)
        elif kind == messages.FAULT:
            self.fault = str(message.get("message"))
        elif kind == messages.ERROR:
            self.error = str(message.get("message"))
        elif kind == messages.STOPPED:
            self.stopped = True
        elif kind == messages.DEBUG and self.on_debug is not None:
            self.on_debug(str(message["host"]), int(message["port"]))
        elif kind == messages.END:
            self.end = dict(message)
        elif kind == messages.MODULES:
            self._modules = list(message["entries"])
        elif kind == messages.COMPILE:
            self._compile_mode = compile_mode_of(message.get("mode"))
        elif kind == messages.SHAPE_ONLY:
            self._shape_only = shape_only_of(message)
        elif kind == messages.SIMULATED:
            self._simulated = tuple(
                SimulatedLine(file=r.file, line=r.line, values=r.values, decisions=r.decisions)
                for r in map(_simulated_record, message["entries"])
            )
        elif kind == messages.MEMORY:
            self._memory = message["report"]
        elif kind == messages.COLLECTIVES:
            self._rank = int(message["rank"])
            for entry in message["entries"]:
                record = messages.read_record(CollectiveRecord, entry)
                self._calls[(record.group, record.seq)] = record
            if len(self._calls) > _CALLS_KEPT:  # the rank keeps as many: the rest are old
                latest = sorted(self._calls.items(), key=lambda item: item[1].started)
                self._calls = dict(latest[-_CALLS_KEPT:])
        elif kind == messages.POSITION:
            self._position = list(message["stack"])
            inside = message.get("inside")
            self._inside = inside if isinstance(inside, str) else None

    def rank_facts(self, ending: str | None) -> RankFacts:
        """What this rank's channel said besides its trace (``ending``: its warden's word)."""
        rank = self._rank or 0
        calls = sorted(self._calls.values(), key=lambda record: record.started)
        return RankFacts(
            calls=tuple(_rank_call(rank, record) for record in calls),
            position=tuple(_frame(entry) for entry in self._position),
            ending=ending,
            first_bound={key: index for index, key in enumerate(self._vars)},
            stopped=self.stopped,
            inside=self._inside,
        )

    def _status(
        self, returncode: int | None, outcome: str | None
    ) -> tuple[RunStatus, int, str | None]:
        if outcome == "running":
            return "running", 0, "still running"
        if outcome == "timeout":
            return "timeout", TIMEOUT_EXIT_CODE, "stopped by the time limit"
        if outcome == "cancelled":
            return "timeout", TIMEOUT_EXIT_CODE, "cancelled"
        if self.end is not None:
            return self.end["status"], int(self.end["exit_code"]), None
        if returncode is None:
            return "crashed", 1, "ended without a final record"
        code = returncode
        if code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            return "crashed", 128 - code, f"killed by {name}"
        return "exit", code, "the process exited without finishing (native exit)"

    def build(self, *, duration_s: float, returncode: int | None, outcome: str | None) -> Trace:
        status, exit_code, detail = self._status(returncode, outcome)
        if self.error is not None:
            status, exit_code, detail = "exit", 2, self.error
        exc = (self.end or {}).get("exception") or (self.crash if status == "crashed" else None)
        keys = sorted(set(self._hits) | set(self._vars))
        lines = tuple(
            TracedLine(
                file=file,
                line=line,
                hits=self._hits.get((file, line), 0),
                sampled=(file, line) in self._sampled,
                vars=tuple(
                    _var(read_record(VarRecord, entry))
                    for entry in self._vars.get((file, line), {}).values()
                ),
            )
            for file, line in keys
        )
        return Trace(
            argv=tuple(self.argv),
            python=self.python or "0.0.0",
            tracing=self.tracing,
            tracing_stopped=self.fault,
            duration_s=duration_s,
            status=status,
            exit_code=exit_code,
            detail=detail,
            compile_mode=self._compile_mode,
            shape_only=None
            if self._shape_only is None
            else replace(self._shape_only, simulated=self._simulated),
            exception=None
            if exc is None
            else ExceptionInfo(
                type=exc["type"], message=exc["message"], file=exc["file"], line=exc["line"]
            ),
            lines=lines,
            findings=tuple(_finding(f) for f in self._findings),
            modules=tuple(module_from_json(m) for m in self._modules),
            memory=memory_from_json(self._memory),
        )


def _frame(entry: Sequence[Any]) -> StackFrame:
    return StackFrame(file=str(entry[0]), line=int(entry[1]), function=str(entry[2]))


def _rank_call(rank: int, record: CollectiveRecord) -> RankCall:
    return RankCall(
        rank=rank,
        op=record.op,
        file=record.file,
        line=record.line,
        seq=record.seq,
        group=record.group,
        state=record.state,
        note=record.error,
        tensors=tuple(
            Operand(
                name=str(name),
                shape=tuple(int(d) for d in shape),
                dtype=dtype,
                device=device,
                file=record.file,
                line=record.line,
                rank=rank,
            )
            for name, shape, dtype, device in record.tensors
        ),
        stack=tuple(_frame(entry) for entry in record.stack or ()),
    )


def _simulated_record(entry: Any) -> messages.SimulatedRecord:
    return messages.read_record(messages.SimulatedRecord, entry)


def _var(var: VarRecord) -> TracedVar:
    return TracedVar(
        name=var.name,
        type=var.type,
        shape=None if var.shape is None else tuple(var.shape),
        dtype=var.dtype,
        device=var.device,
        requires_grad=var.requires_grad,
        hits=var.hits,
        shapes=tuple(tuple(s) for s in var.shapes),
        grad_fn=var.grad_fn,
        dim_ranges=None
        if var.dim_ranges is None
        else tuple((int(lo), int(hi)) for lo, hi in var.dim_ranges),
        number=None if var.number is None else read_number(var.number),
        history=() if var.history is None else messages.read_numbers(var.history),
        shape_hits=() if var.shape_hits is None else tuple(int(n) for n in var.shape_hits),
        grad_varied=bool(var.grad_varied),
        bounded_dims=tuple(int(d) for d in var.bounded_dims or ()),
        placements=None if var.sharding is None else str(var.sharding[0]),
        local_shape=None if var.sharding is None else tuple(int(d) for d in var.sharding[1]),
    )


def _finding(data: dict[str, Any]) -> Finding:
    return finding_from_json(data)
