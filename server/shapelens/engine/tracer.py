"""The line tracer (``sys.settrace``), chained to any tracer already installed.

For each frame of user code it keeps the statement that is running; when the next
statement starts (or the frame returns), the names the finished statement stored are read
from the frame and their metadata recorded on that statement's line. Only stored names are
read, so the cost per line event does not grow with the number of locals or iterations.
"""

from __future__ import annotations

import builtins
import dis
import os
import sys
import threading
import weakref
from collections.abc import Callable
from types import CodeType, FrameType
from typing import Any

from shapelens.engine import values
from shapelens.engine.findings import FindingsConfig
from shapelens.engine.findings.broadcast import find_broadcast
from shapelens.engine.findings.mismatch import explain_all, mismatch_kind, operands_of
from shapelens.engine.findings.nonfinite import nonfinite_state
from shapelens.engine.findings.shapes import fmt
from shapelens.engine.recorder import MAX_SHAPES, Recorder, VarStats
from shapelens.engine.scope import UserCodeScope
from shapelens.engine.source_map import Expr, SourceMap, SourceMaps

TraceFunction = Callable[[FrameType, str, Any], Any]

_STORE_OPS = frozenset(
    {
        "STORE_FAST",
        "STORE_NAME",
        "STORE_GLOBAL",
        "STORE_DEREF",
        "STORE_FAST_STORE_FAST",
        "STORE_FAST_LOAD_FAST",
    }
)
_GENERATOR_FLAGS = 0x20 | 0x80 | 0x200  # CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR
_VARARGS, _VARKEYWORDS = 0x04, 0x08
NO_STATEMENT = _NO_STATEMENT = -1
_MISSING = object()


class CodeInfo:
    """What the tracer needs about one code object of user code, computed once."""

    __slots__ = (
        "arg_names",
        "broadcast_checks",
        "def_line",
        "definitions",
        "elementwise",
        "file",
        "global_names",
        "hits",
        "is_generator",
        "is_module",
        "source",
        "statement_of",
        "stats",
        "stores",
        "yield_offsets",
    )

    def __init__(self, code: CodeType, file: str, source: SourceMap, recorder: Recorder) -> None:
        self.file = file
        self.source = source
        self.statement_of = source.statement_of
        # def/class lines count calls (below), not the execution of the def statement.
        self.definitions = frozenset(source.def_line_of.values())
        self.is_module = code.co_name == "<module>"
        self.def_line = source.def_line_of.get(code.co_firstlineno, code.co_firstlineno)
        count = code.co_argcount + code.co_kwonlyargcount
        count += bool(code.co_flags & _VARARGS) + bool(code.co_flags & _VARKEYWORDS)
        self.arg_names = code.co_varnames[:count]
        self.is_generator = bool(code.co_flags & _GENERATOR_FLAGS)
        self.hits = recorder.hits_table(file)
        self.stats = recorder.stats_table(file)
        stores: dict[int, list[str]] = {}
        global_names: set[str] = set()
        yield_offsets: set[int] = set()
        lines: set[int] = set()
        for instruction in dis.get_instructions(code):
            line = instruction.positions.lineno if instruction.positions else None
            if line is None:
                continue
            lines.add(line)
            if instruction.opname == "YIELD_VALUE":
                # 3.11/3.12 report the YIELD_VALUE itself as f_lasti, 3.13 the unit after it.
                yield_offsets.update((instruction.offset, instruction.offset + 2))
            if instruction.opname not in _STORE_OPS:
                continue
            statement = self.statement_of.get(line, line)
            names = (
                instruction.argval
                if isinstance(instruction.argval, tuple)
                else (instruction.argval,)
            )
            for name in names:
                if isinstance(name, str) and name not in stores.setdefault(statement, []):
                    stores[statement].append(name)
            if instruction.opname == "STORE_GLOBAL":
                global_names.add(str(instruction.argval))
        self.stores = {line: tuple(names) for line, names in stores.items()}
        self.global_names = frozenset(global_names)
        self.yield_offsets = frozenset(yield_offsets)
        statements = {self.statement_of.get(line, line) for line in lines}
        self.elementwise: dict[int, tuple[Expr, ...]] = {
            line: exprs for line, exprs in source.elementwise.items() if line in statements
        }
        self.broadcast_checks: dict[int, int] = {}


class Tracer:
    """Records per-line tensor metadata of user code into a :class:`Recorder`."""

    def __init__(
        self,
        *,
        scope: UserCodeScope,
        recorder: Recorder,
        findings: FindingsConfig,
        sources: SourceMaps | None = None,
    ) -> None:
        self.scope = scope
        self.recorder = recorder
        self.findings = findings
        self.sources = sources or SourceMaps()
        self._codes: dict[CodeType, CodeInfo | None] = {}
        self._previous: Any = None
        self._previous_threading: Any = None
        self._installed: TraceFunction | None = None
        self._nonfinite = findings.nonfinite
        self._last_exception: tuple[int, type] | None = None
        self._pending_errors: list[tuple[tuple[int, type], list[dict[str, Any]]]] = []
        self._unweakrefable: set[type] = set()

    # -- lifecycle ---------------------------------------------------------------------
    def start(self) -> None:
        self._previous = sys.gettrace()
        self._previous_threading = threading.gettrace()
        installed = self._global if self._previous is None else self._chained(self._previous)
        self._installed = installed
        threading.settrace(installed)
        _settrace(installed)

    def stop(self) -> None:
        """Restore the tracers that were there before, and detach from running frames."""
        _settrace(self._previous)
        threading.settrace(self._previous_threading)
        frame: FrameType | None = sys._getframe()
        while frame is not None:
            trace = frame.f_trace
            if trace is not None and getattr(trace, "__qualname__", "").startswith("Tracer."):
                frame.f_trace = None
            frame = frame.f_back

    def __enter__(self) -> Tracer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- global trace functions ----------------------------------------------------------
    def _global(self, frame: FrameType, event: str, arg: Any) -> TraceFunction | None:
        code = frame.f_code
        info = self._codes.get(code, _MISSING)  # the hit path stays inline: every call event
        if info is _MISSING:
            info = self.info_for(code)
        if info is None:
            return None
        return self._enter(frame, info)  # type: ignore[arg-type]

    def _chained(self, previous: TraceFunction) -> TraceFunction:
        """Call the previous tracer (debugpy, coverage) and ours, keeping both local tracers."""
        ours = self._global

        def chained(frame: FrameType, event: str, arg: Any) -> TraceFunction | None:
            theirs = previous(frame, event, arg)
            mine = ours(frame, event, arg)
            if mine is None:
                return theirs  # type: ignore[no-any-return]
            if theirs is None:
                return mine
            return _both(theirs, mine)

        return chained

    def _describe(self, code: CodeType) -> CodeInfo | None:
        file = self.scope.user_file(code.co_filename)
        if file is None or not self.scope.wants_code(code):
            return None
        return self._code_info(code, file)

    def _code_info(self, code: CodeType, file: str) -> CodeInfo | None:
        try:
            return CodeInfo(code, file, self.sources.get(file), self.recorder)
        except Exception:
            return None  # code we cannot analyse is left untraced, never an error

    # -- shared with the sys.monitoring backend --------------------------------------------
    def info_for(self, code: CodeType) -> CodeInfo | None:
        """What we know about ``code``, or ``None`` when it is not user code (cached)."""
        info = self._codes.get(code, _MISSING)
        if info is _MISSING:
            info = self._codes[code] = self._describe(code)
        return info  # type: ignore[return-value]

    def known(self, code: CodeType) -> CodeInfo | None:
        """Like :meth:`info_for`, without describing new code (for hot global events)."""
        info = self._codes.get(code)
        return info if isinstance(info, CodeInfo) else None

    def enter_call(self, frame: FrameType, info: CodeInfo) -> None:
        """A fresh call of user code: count the def line, record the arguments."""
        if info.is_module:
            return
        info.hits[info.def_line] = info.hits.get(info.def_line, 0) + 1
        if info.arg_names:
            self._capture(frame, info, info.def_line, info.arg_names, True)

    def local_tracer(self, frame: FrameType, *, record_arguments: bool) -> TraceFunction | None:
        """A local tracer for a frame another tracer chose (snoop's targets), bypassing the
        scope; ``record_arguments`` is false for frames entered mid-way (``with`` blocks)."""
        code = frame.f_code
        info = self._codes.get(code)
        if info is None:
            if code.co_filename.startswith("<"):
                return None
            info = self._code_info(code, os.path.realpath(code.co_filename))
            if info is None:
                return None
            self._codes[code] = info
        return self._enter(frame, info, record_arguments=record_arguments)

    # -- per-frame local tracer --------------------------------------------------------
    def _enter(
        self, frame: FrameType, info: CodeInfo, record_arguments: bool = True
    ) -> TraceFunction:
        statement_of = info.statement_of
        stores = info.stores
        hits = info.hits
        elementwise = info.elementwise
        definitions = info.definitions
        capture = self._capture
        if info.is_generator and frame.f_lineno != frame.f_code.co_firstlineno:
            previous = statement_of.get(frame.f_lineno, frame.f_lineno)  # resumed after a yield
        else:
            previous = _NO_STATEMENT
            if record_arguments:
                self.enter_call(frame, info)

        def local(frame: FrameType, event: str, arg: Any) -> TraceFunction:
            nonlocal previous
            if event == "line":
                line = frame.f_lineno
                statement = statement_of.get(line, line)
                if statement != previous:
                    if previous in stores:
                        capture(frame, info, previous, stores[previous], False)
                    previous = statement
                    if statement not in definitions:
                        hits[statement] = hits.get(statement, 0) + 1
                    if statement in elementwise:
                        self._check_broadcast(frame, info, statement)
            elif event == "return":
                yielded = info.is_generator and frame.f_lasti in info.yield_offsets
                if previous in stores and not yielded:
                    capture(frame, info, previous, stores[previous], False)
                if arg is not None and previous != _NO_STATEMENT:
                    line = frame.f_lineno
                    self._record_value(
                        info,
                        statement_of.get(line, line),
                        "<yield>" if yielded else "<return>",
                        arg,
                    )
                previous = _NO_STATEMENT
            elif event == "exception":
                previous = _NO_STATEMENT
                self._on_exception(frame, info, arg)
            return local

        return local

    # -- recording -----------------------------------------------------------------------
    def _capture(
        self, frame: FrameType, info: CodeInfo, line: int, names: tuple[str, ...], arguments: bool
    ) -> None:
        try:
            scope = frame.f_locals
        except Exception:
            return
        table = info.stats.get(line)
        if table is None:
            table = info.stats[line] = {}
        kinds = values.kind_of_type
        for name in names:
            value = scope.get(name, _MISSING)
            if value is _MISSING:
                if name not in info.global_names:
                    continue
                value = frame.f_globals.get(name, _MISSING)
                if value is _MISSING:
                    continue
            kind = kinds.get(type(value))
            if kind is None:
                kind = values.classify(value)
            if kind:
                self._observe(info, table, line, name, value, kind, arguments, 0)

    def _record_value(self, info: CodeInfo, line: int, name: str, value: Any) -> None:
        kind = values.kind_of(value)
        if kind:
            table = info.stats.get(line)
            if table is None:
                table = info.stats[line] = {}
            self._observe(info, table, line, name, value, kind, False, 0)

    def _observe(
        self,
        info: CodeInfo,
        table: dict[str, VarStats],
        line: int,
        name: str,
        value: Any,
        kind: int,
        argument: bool,
        depth: int,
    ) -> None:
        if kind in values.CONTAINER_KINDS:
            if depth < values.MAX_CONTAINER_DEPTH:
                for entry, item in values.container_entries(name, value, kind):
                    item_kind = values.kind_of(item)
                    if item_kind:
                        self._observe(
                            info, table, line, entry, item, item_kind, argument, depth + 1
                        )
            return
        tp = type(value)
        stats = table.get(name)
        if stats is None:
            stats = table[name] = self.recorder.new_stats(info.file, line, name, tp)
            stats.is_argument = argument
        stats.type = tp
        stats.hits += 1
        try:
            if kind == values.TORCH:
                stats.dtype = value.dtype
                stats.device = value.device
                requires_grad = stats.requires_grad = value.requires_grad
                if requires_grad:
                    grad_fn = value.grad_fn
                    stats.grad_fn = None if grad_fn is None else type(grad_fn).__name__
                else:
                    stats.grad_fn = None
                shape = value.shape
            else:
                stats.dtype = value.dtype
                stats.device = getattr(value, "device", None)
                shape = tuple(value.shape)
        except Exception:
            shape = None  # nested tensors and odd objects: keep what could be read
        if shape != stats.shape:
            stats.shape = shape
            shapes = stats.shapes
            if shape is not None and len(shapes) < MAX_SHAPES and shape not in shapes:
                shapes.append(shape)
        if tp not in self._unweakrefable:
            try:
                stats.ref = weakref.ref(value)
            except TypeError:
                self._unweakrefable.add(tp)
        if self._nonfinite and stats.hits >= stats.next_nonfinite_check:
            stats.next_nonfinite_check = stats.hits * 2
            self._check_nonfinite(stats, value, kind)

    # -- findings --------------------------------------------------------------------------
    def _check_nonfinite(self, stats: VarStats, value: Any, kind: int) -> None:
        config = self.findings
        state = nonfinite_state(value, kind, config.nonfinite_max_elements, config.nonfinite_on_gpu)
        if state is None:
            return
        self._nonfinite = False  # only the first line where it happens
        shape = tuple(stats.shape) if stats.shape is not None else None
        self.recorder.add_finding(
            {
                "kind": "nonfinite",
                "severity": "warning",
                "file": stats.file,
                "line": stats.line,
                "message": f"non-finite: `{stats.name}` {fmt(shape)} "
                f"{values.dtype_name(stats.dtype)} first holds {state} here "
                f"(hit {stats.hits} of this line)",
                "related": [],
            }
        )

    def _check_broadcast(self, frame: FrameType, info: CodeInfo, line: int) -> None:
        count = info.broadcast_checks.get(line, 0) + 1
        info.broadcast_checks[line] = count
        if count > 2 and count & (count - 1):
            return  # check hits 1, 2, 4, 8, ...: shapes rarely change, the cost stays bounded
        if not self.findings.broadcast:
            info.elementwise.pop(line, None)
            return
        resolve = _resolver(frame)

        def shape_of(path: tuple[str, ...]) -> tuple[int, ...] | None:
            value = resolve(path)
            if isinstance(value, (int, float, complex)):
                return ()
            kind = values.kind_of(value)
            if kind in (values.TORCH, values.ARRAY):
                try:
                    return tuple(int(d) for d in value.shape)
                except Exception:
                    return None
            return None

        for expr in info.elementwise.get(line, ()):
            try:
                found = find_broadcast(expr, shape_of)
            except Exception:
                found = None
            if found is not None:
                info.elementwise.pop(line, None)
                self.recorder.add_finding(
                    {
                        "kind": "broadcast",
                        "severity": "warning",
                        "file": info.file,
                        "line": line,
                        "message": found.message(),
                        "related": [],
                    }
                )
                return

    def _on_exception(self, frame: FrameType, info: CodeInfo, arg: Any) -> None:
        exc = arg[1] if isinstance(arg, tuple) and len(arg) > 1 else None
        # Exceptions can't be weakly referenced and a strong reference would keep their
        # frames alive, so they are recognised by id and type.
        key = (id(exc), type(exc))
        if exc is None or key == self._last_exception:
            return  # already seen in a more inner frame of user code
        self._last_exception = key
        kind = mismatch_kind(exc) if self.findings.mismatch else None
        if kind is None:
            return
        line = info.statement_of.get(frame.f_lineno, frame.f_lineno)
        statement = info.source.statements.get(line)
        if statement is None:
            return
        try:
            operands = operands_of(statement, _resolver(frame))
            error = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            findings = explain_all(kind, operands, self.recorder.origin_of, info.file, line, error)
        except Exception:
            return
        if findings:
            self._pending_errors = [*self._pending_errors[-7:], (key, findings)]

    def conclude(self, exc: BaseException | None) -> None:
        """The run ended with ``exc``: report the mismatch finding it caused, if any."""
        for key, findings in self._pending_errors:
            if exc is not None and key == (id(exc), type(exc)):
                for finding in findings:
                    self.recorder.add_finding(finding)
        self._pending_errors = []


def _settrace(function: Any) -> None:
    """``sys.settrace``; under debugpy, its original (pydevd wraps sys.settrace to warn
    "should not be used", but we chain to pydevd's tracer and restore it, as it asks)."""
    holder = getattr(sys.modules.get("pydevd_tracing"), "TracingFunctionHolder", None)
    original = getattr(holder, "_original_tracing", None)
    (original if callable(original) else sys.settrace)(function)


def _both(first: TraceFunction, second: TraceFunction) -> TraceFunction:
    theirs: TraceFunction | None = first
    mine = second

    def both(frame: FrameType, event: str, arg: Any) -> TraceFunction:
        nonlocal theirs, mine
        if theirs is not None:
            theirs = theirs(frame, event, arg)
        mine = mine(frame, event, arg)
        return both

    return both


def _resolver(frame: FrameType) -> Callable[[tuple[str, ...]], Any]:
    scope = frame.f_locals
    globals_ = frame.f_globals

    def resolve(path: tuple[str, ...]) -> Any:
        head = path[0]
        value = scope.get(head, _MISSING)
        if value is _MISSING:
            value = globals_.get(head, _MISSING)
        if value is _MISSING:
            value = getattr(builtins, head, None)
        for attr in path[1:]:
            if value is None:
                return None
            value = values.safe_attribute(value, attr)
        return value

    return resolve
