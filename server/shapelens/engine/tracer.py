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
import warnings
import weakref
from collections.abc import Callable
from types import CodeType, FrameType
from typing import Any

from shapelens.engine import values
from shapelens.engine.findings import FindingsConfig
from shapelens.engine.findings.broadcast import Broadcast, accidental, find_broadcast
from shapelens.engine.findings.intent import NO_SHAPING, line_shaping, silences
from shapelens.engine.findings.library_warnings import WarningListener, severity_of
from shapelens.engine.findings.mismatch import explain_all, mismatch_kind, operands_of
from shapelens.engine.findings.nonfinite import (
    holds_only_zero_or_inf,
    is_mask_text,
    nonfinite_flags,
    nonfinite_state,
    takes_log,
)
from shapelens.engine.findings.op_watch import OpWatch
from shapelens.engine.recorder import MAX_SHAPES, Recorder, VarStats
from shapelens.engine.scope import UserCodeScope
from shapelens.engine.source_map import Candidate, OpSite, SourceMap, SourceMaps

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
        "broadcast_lines",
        "def_line",
        "definitions",
        "elementwise",
        "file",
        "global_names",
        "hits",
        "is_generator",
        "is_module",
        "op_sites",
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
        self.elementwise: dict[int, tuple[Candidate, ...]] = {
            line: exprs for line, exprs in source.elementwise.items() if line in statements
        }
        # Elementwise operators, watched as they run when torch is loaded (their operands
        # may be calls or subscripts, or attributes of objects we cannot read safely).
        self.op_sites: dict[int, tuple[OpSite, ...]] = {
            line: sites for line, sites in source.op_sites.items() if line in statements
        }
        self.broadcast_lines = set(self.elementwise) | set(self.op_sites)
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
        self.op_watch = OpWatch(self._on_op)
        self._warnings = WarningListener(self._on_warning)
        self._warned: set[tuple[str, int, str]] = set()
        self._capturing: FrameType | None = None
        """The frame whose finished statement is being recorded (for the nonfinite check)."""
        self._watched: dict[int, tuple[CodeInfo, int, dict[str, int]]] = {}

    # -- lifecycle ---------------------------------------------------------------------
    def start(self) -> None:
        self._previous = sys.gettrace()
        self._previous_threading = threading.gettrace()
        installed = self._global if self._previous is None else self._chained(self._previous)
        self._installed = installed
        threading.settrace(installed)
        _settrace(installed)
        self.start_listening()

    def stop(self) -> None:
        """Restore the tracers that were there before, and detach from running frames."""
        self.stop_listening()
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
        broadcast_lines = info.broadcast_lines
        watched = self._watched
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
                    if watched:
                        self.end_watch(frame)
                    if previous in stores:
                        capture(frame, info, previous, stores[previous], False)
                    previous = statement
                    if statement not in definitions:
                        hits[statement] = hits.get(statement, 0) + 1
                    if statement in broadcast_lines:
                        self._check_broadcast(frame, info, statement)
            elif event == "return":
                if watched:
                    self.end_watch(frame)
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
                if watched:
                    self.end_watch(frame)
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
        self._capturing = frame
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
        self._capturing = None  # a returned value: no statement inputs to read
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
        frame, self._capturing = self._capturing, None
        inputs = self._statement_inputs(frame, stats.line, value) if frame is not None else []
        if state == "Inf" and self._is_mask(stats, value, inputs):
            return  # -inf on purpose (a causal mask): not a bug
        self._nonfinite = False  # only the first line where it happens
        operand = {
            "name": stats.name,
            "shape": None if stats.shape is None else [int(d) for d in stats.shape],
            "dtype": values.dtype_name(stats.dtype),
            "device": values.device_name(stats.device),
            "requires_grad": stats.requires_grad,
            "line": stats.line,
        }
        source = self.sources.get(stats.file)
        self.recorder.add_finding(
            {
                "kind": "nonfinite",
                "severity": "warning",
                "file": stats.file,
                "line": stats.line,
                "expression": source.statement_text(stats.line) or None,
                "operands": [
                    operand,
                    *({"name": name, "shape": list(_shape(v) or ()), **self._facts(v)}
                      for name, v in inputs),
                ],  # the value, then what the line computed it from
                "state": state,
                "hit": stats.hits,
            }
        )  # fmt: skip

    def _statement_inputs(self, frame: FrameType, line: int, value: Any) -> list[tuple[str, Any]]:
        """The tensors the statement names (other than its result), as they are now."""
        info = self.known(frame.f_code)
        statement = info.source.statements.get(line) if info is not None else None
        if statement is None:
            return []
        try:
            found = operands_of(statement, _resolver(frame))
        except Exception:
            return []
        return [(o.label, o.value) for o in found if not o.is_module and o.value is not value][:6]

    def _is_mask(self, stats: VarStats, value: Any, inputs: list[tuple[str, Any]]) -> bool:
        """An Inf that is a mask: made by masked_fill/where/an inf literal, the log of a 0/1
        tensor, or carried over from an input that held it already."""
        text = self.sources.get(stats.file).statement_text(stats.line)
        if is_mask_text(text) or (takes_log(text) and holds_only_zero_or_inf(value)):
            return True
        origin = self.recorder.origin_of(value)  # made by a helper: `mask = causal_mask(T)`
        if origin is not None and (origin.file, origin.line) != (stats.file, stats.line):
            born = self.sources.get(origin.file).statement_text(origin.line)
            if is_mask_text(born) or (takes_log(born) and holds_only_zero_or_inf(value)):
                return True
        config = self.findings
        for _, item in inputs:
            flags = nonfinite_flags(
                item, values.kind_of(item), config.nonfinite_max_elements, config.nonfinite_on_gpu
            )
            if flags is not None and flags[1]:
                return True
        return False

    def _check_broadcast(self, frame: FrameType, info: CodeInfo, line: int) -> None:
        count = info.broadcast_checks.get(line, 0) + 1
        info.broadcast_checks[line] = count
        if count > 2 and count & (count - 1):
            return  # check hits 1, 2, 4, 8, ...: shapes rarely change, the cost stays bounded
        if not self.findings.broadcast:
            info.broadcast_lines.discard(line)
            return
        resolve = _resolver(frame)
        candidates = info.elementwise.get(line, ())
        if candidates:

            def shape_of(path: tuple[str, ...]) -> tuple[int, ...] | None:
                return _shape(resolve(path))

            def shaping(path: tuple[str, ...]) -> int:
                return self._born_shaping(resolve(path))

            for candidate in candidates:
                try:
                    found = find_broadcast(candidate, shape_of, shaping)
                except Exception:
                    found = None
                if found is not None:
                    self._report_broadcast(info, line, found, ())
                    return
        if line in info.op_sites and self.op_watch.begin(frame):
            self._watched[id(frame)] = (info, line, {})

    def end_watch(self, frame: FrameType) -> None:
        """The watched statement of ``frame`` is over (next statement, return, raise)."""
        if self._watched.pop(id(frame), None) is not None:
            self.op_watch.end(frame)

    def _on_op(self, frame: FrameType, op: str, left: Any, right: Any, result: Any) -> None:
        """An elementwise torch op, called by a watched statement, with its real operands."""
        entry = self._watched.get(id(frame))
        if entry is None:
            return
        info, line, counts = entry
        sites = [site for site in info.op_sites.get(line, ()) if site.op == op]
        if not sites:
            return
        index = counts.get(op, 0)
        counts[op] = index + 1
        site = sites[min(index, len(sites) - 1)]
        if silences(site.shaping, reduced=site.reduced):
            return  # shaped on purpose (None index, unsqueeze, view, ...)
        shapes = (_shape(left), _shape(right), _shape(result))
        if any(shape is None for shape in shapes):
            return
        left_shape, right_shape, result_shape = shapes
        assert left_shape is not None and right_shape is not None and result_shape is not None
        if not accidental(left_shape, right_shape, result_shape, reduced=site.reduced):
            return
        born = max(self._born_shaping(left), self._born_shaping(right))
        if silences(born, reduced=site.reduced):
            return
        found = Broadcast(
            op, site.text, site.left, left_shape, site.right, right_shape, result_shape
        )
        self._report_broadcast(info, line, found, (self._facts(left), self._facts(right)))

    def _report_broadcast(
        self, info: CodeInfo, line: int, found: Broadcast, operands: tuple[dict[str, Any], ...]
    ) -> None:
        info.broadcast_lines.discard(line)  # one finding per line is enough
        if not self.recorder.has_finding("broadcast", info.file, line):
            self.recorder.add_finding(found.to_data(info.file, line, operands))

    def _born_shaping(self, value: Any) -> int:
        """How the line where the value was born shaped it (``.unsqueeze(1)``: on purpose)."""
        if _shape(value) in (None, ()):
            return NO_SHAPING
        origin = self.recorder.origin_of(value)
        if origin is None:
            return NO_SHAPING
        return line_shaping(self.sources.get(origin.file).statement_text(origin.line))

    def _facts(self, value: Any) -> dict[str, Any]:
        """What a finding says about an operand value: metadata and where it was born."""
        facts: dict[str, Any] = {}
        try:
            facts["dtype"] = values.dtype_name(getattr(value, "dtype", None))
            facts["device"] = values.device_name(getattr(value, "device", None))
            facts["requires_grad"] = getattr(value, "requires_grad", None)
        except Exception:
            return {}
        origin = self.recorder.origin_of(value) if _shape(value) not in (None, ()) else None
        if origin is not None:
            facts.update(file=origin.file, line=origin.line, passed_in=origin.is_argument)
            facts["born_as"] = origin.name
        return facts

    # -- library warnings (both backends) -------------------------------------------
    def start_listening(self) -> None:
        if self.findings.warnings:
            self._warnings.start()

    def stop_listening(self) -> None:
        self._warnings.stop()

    def _on_warning(self, message: str, category: type) -> None:
        """A warning is being shown: place it on the innermost user line that is running."""
        frame: FrameType | None = sys._getframe(1)
        issuer: FrameType | None = None
        info: CodeInfo | None = None
        while frame is not None:
            filename = frame.f_code.co_filename
            if filename.startswith(_OWN_FILES):
                frame = frame.f_back
                continue
            issuer = issuer or frame
            info = self.known(frame.f_code)
            if info is not None:
                break
            frame = frame.f_back
        if frame is None or info is None:
            return
        line = info.statement_of.get(frame.f_lineno, frame.f_lineno)
        text = info.source.statement_text(line)
        if issuer is frame and "warn" in text:
            return  # the user's own warnings.warn(...)
        first = message.strip().splitlines()[0] if message.strip() else category.__name__
        key = (info.file, line, first)
        if key in self._warned:
            return
        self._warned.add(key)
        inputs = self._statement_inputs(frame, line, None)
        self.recorder.add_finding(
            {
                "kind": "library_warning",
                "severity": severity_of(first, category),
                "file": info.file,
                "line": line,
                "expression": text or None,
                "operands": [
                    {"name": name, "shape": list(_shape(v) or ()), **self._facts(v)}
                    for name, v in inputs
                ],
                "error": f"{category.__name__}: {first}",
            }
        )

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
            resolve = _resolver(frame)
            operands = operands_of(statement, resolve)
            error = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            findings = explain_all(
                kind,
                operands,
                self.recorder.origin_of,
                info.file,
                line,
                error,
                statement=statement,
                declared_at=self._declarations(info, resolve),
                expression=info.source.statement_text(line) or None,
            )
        except Exception:
            return
        if findings:
            self._pending_errors = [*self._pending_errors[-7:], (key, findings)]

    def _declarations(
        self, info: CodeInfo, resolve: Callable[[tuple[str, ...]], Any]
    ) -> Callable[[str, Any], tuple[str, int] | None]:
        """Where a module operand was declared: ``self.fc = nn.Linear(...)`` in its owner's
        class, or ``model = ...`` in this file."""

        def declared_at(label: str, module: Any) -> tuple[str, int] | None:
            *owner_path, name = label.split(".")
            if not owner_path:
                found = info.source.assignment_line(name, on_self=False)
                return (info.file, found) if found is not None else None
            owner = resolve(tuple(owner_path))
            for klass in type(owner).__mro__:
                code = getattr(getattr(klass, "__init__", None), "__code__", None)
                if code is None or code.co_filename.startswith("<"):
                    continue
                file = os.path.realpath(code.co_filename)
                found = self.sources.get(file).assignment_line(name, on_self=True)
                if found is not None:
                    return file, found
            return None

        return declared_at

    def conclude(self, exc: BaseException | None) -> None:
        """The run ended with ``exc``: report the mismatch finding it caused, if any."""
        for key, findings in self._pending_errors:
            if exc is not None and key == (id(exc), type(exc)):
                for finding in findings:
                    self.recorder.add_finding(finding)
        self._pending_errors = []


# Frames of the warnings machinery and of ShapeLens itself, skipped to find who warned.
_OWN_FILES = (warnings.__file__, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


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


def _shape(value: Any) -> tuple[int, ...] | None:
    """The shape of a tensor or array, ``()`` for a Python number, else None."""
    if isinstance(value, (int, float, complex)):
        return ()
    kind = values.kind_of(value)
    if kind in (values.TORCH, values.ARRAY):
        try:
            return tuple(int(d) for d in value.shape)
        except Exception:
            return None
    return None
