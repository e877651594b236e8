"""The recorder of frame events, driven by both tracing backends (``sys.settrace`` in
:mod:`shapelens.engine.tracer`, ``sys.monitoring`` in :mod:`shapelens.engine.monitoring`).

A backend follows each frame of user code and reports what happens to it: a call started
(:meth:`FrameEvents.enter_call`), a statement started (:meth:`FrameEvents.statement_started`,
called only when the frame moves to another statement), the frame returned or yielded
(:meth:`FrameEvents.frame_returned`), an exception was raised in it
(:meth:`FrameEvents.exception_raised`). When a statement is over, the names it stored are
read from the frame and their metadata recorded on its line: only stored names are read, so
the cost per event does not grow with the number of locals or iterations. The findings that
need the running program (non-finite values, broadcasts, library warnings, shape and dtype
errors) are checked here too, so both backends record the same things.

Hits are always counted exactly. Reading values (the costly part: the frame's locals and
each tensor's metadata) is sampled per statement: every hit for its first
:data:`DENSE_HITS` hits, then every :data:`SAMPLE_GAP`-th hit, and again on every hit for
:data:`DENSE_HITS` hits after a read saw something new (a shape, dtype, device or type). A
statement skipped since its last read, whose names no other statement stores, is read once
more when its frame ends, so a loop's last value (the smaller final batch) is seen.
"""

from __future__ import annotations

import ast
import builtins
import math
import os
import sys
import warnings
import weakref
from collections.abc import Callable
from types import CodeType, FrameType
from typing import Any

from shapelens.engine import values
from shapelens.engine.code_info import NO_STATEMENT, CodeInfo
from shapelens.engine.findings import FindingsConfig
from shapelens.engine.findings.broadcast import Broadcast, accidental, find_broadcast
from shapelens.engine.findings.intent import KEEPDIM, NO_SHAPING, line_shaping, silences
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
from shapelens.engine.source_map import SourceMaps, declared_in_class

__all__ = ["NO_STATEMENT", "CodeInfo", "FrameEvents"]

_MISSING = object()

DENSE_HITS = 64
"""A statement's values are read on each of its first hits, and after a change, this many."""
SAMPLE_GAP = 13
"""Past those, values that stay the same are read every this many hits (a prime: patterns
of any shorter period, such as alternating shapes, are still all seen)."""


class FrameEvents:
    """Records per-line tensor metadata of user code into a :class:`Recorder`, from the
    frame events a tracing backend reports."""

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
        self.codes: dict[int, CodeInfo | None] = {}
        """``id(code)`` → what we know about the code object, ``None`` when it is not user
        code. Read-only for backends, which look codes up here inline on their hottest
        events. Keyed by id: hashing a code object hashes its bytecode and constants, up to
        4 µs for a torch function on 3.12; the codes are kept alive, so no id is reused."""
        self._seen_codes: list[CodeType] = []
        self.op_watch = OpWatch(self._on_op)
        self.scalars_on_gpu = False
        """Read 0-dim GPU tensors for their course (each read synchronises the device)."""
        self._nonfinite = findings.nonfinite
        self._last_exception: tuple[int, type] | None = None
        self._pending_errors: list[tuple[tuple[int, type], list[dict[str, Any]]]] = []
        self._unweakrefable: set[type] = set()
        self._warnings = WarningListener(self._on_warning)
        self._warned: set[tuple[str, int, str]] = set()
        self._capturing: FrameType | None = None
        """The frame whose finished statement is being recorded (for the nonfinite check)."""
        self._watched: dict[int, tuple[CodeInfo, int, dict[str, int]]] = {}
        self._news_listeners: list[Callable[[], None]] = []
        self.statement_started = self._statement_hook()
        self.loop_iterated = self._iteration_hook()

    # -- code objects ------------------------------------------------------------------
    def info_for(self, code: CodeType) -> CodeInfo | None:
        """What we know about ``code``, or ``None`` when it is not user code (cached)."""
        info = self.codes.get(id(code), _MISSING)
        if info is _MISSING:
            info = self._remember(code, self.describe(code))
        return info  # type: ignore[return-value]

    def _remember(self, code: CodeType, info: CodeInfo | None) -> CodeInfo | None:
        self._seen_codes.append(code)  # alive as long as its id is a key
        self.codes[id(code)] = info
        return info

    def known(self, code: CodeType) -> CodeInfo | None:
        """Like :meth:`info_for`, without describing new code (for hot global events)."""
        return self.codes.get(id(code))

    def describe(self, code: CodeType) -> CodeInfo | None:
        """``code`` analysed, or ``None`` when it is not user code (not cached)."""
        file = self.scope.user_file(code.co_filename)
        if file is None or not self.scope.wants_code(code):
            return None
        return self._code_info(code, file)

    def info_unscoped(self, code: CodeType) -> CodeInfo | None:
        """What we know about ``code`` of any file, the scope not consulted (a frame another
        tracer chose: snoop's targets); ``None`` for code without a file (``<string>``)."""
        info = self.codes.get(id(code))
        if info is None:
            if code.co_filename.startswith("<"):
                return None
            info = self._code_info(code, os.path.realpath(code.co_filename))
            if info is None:
                return None
            self._remember(code, info)
        return info

    def _code_info(self, code: CodeType, file: str) -> CodeInfo | None:
        try:
            return CodeInfo(code, file, self.sources.get(file), self.recorder)
        except Exception:
            return None  # code we cannot analyse is left untraced, never an error

    # -- frame events (what a backend reports) -----------------------------------------
    def enter_call(self, frame: FrameType, info: CodeInfo) -> None:
        """A fresh call of user code: count the def line, record the arguments."""
        if info.is_module:
            return
        calls = info.hits[info.def_line] = info.hits.get(info.def_line, 0) + 1
        if info.arg_names:
            self._read(frame, info, info.def_line, info.arg_names, calls, arguments=True)

    def _statement_hook(self) -> Callable[[FrameType, CodeInfo, int, int], int]:
        """``statement_started(frame, info, previous, statement)``: ``frame`` moved from
        statement ``previous`` (maybe :data:`NO_STATEMENT`) to another, ``statement``: record
        what ``previous`` stored, count the hit, check broadcasts. Returns the statement's hit
        count (0 for a def or class line, which counts calls). Backends call it on nearly
        every line event, so it is a closure that reads no attributes of ``self``."""
        watched = self._watched
        end_watch = self._end_watch
        read = self._read
        check_broadcast = self._check_broadcast

        def statement_started(
            frame: FrameType, info: CodeInfo, previous: int, statement: int
        ) -> int:
            if watched:
                end_watch(frame)
            hits = info.hits
            stores = info.stores
            if previous in stores:
                hit = hits.get(previous, 0)
                # _read's unread branch, inline: this runs on nearly every line event.
                if hit < info.capture_at.get(previous, 0):  # not sampled: only count it
                    table = info.stats.get(previous)
                    if table:
                        for name, stats in table.items():
                            if name[0] != "<":  # not a <return>/<yield> recorded on the line
                                stats.hits += 1
                    info.stale.add(previous)
                else:
                    read(frame, info, previous, stores[previous], hit)
            if (
                previous in info.loop_headers
                and previous != statement  # header to header: the next iteration
                and info.counter_of.get(statement) != previous
            ):
                exits = info.loop_exits  # the header's hit was the loop's end
                exits[previous] = exits.get(previous, 0) + 1
            if statement in info.definitions:
                return 0
            count = hits[statement] = hits.get(statement, 0) + 1
            # Broadcasts are checked on hits 1, 2, 4, 8, ...: shapes rarely change there.
            if not count & (count - 1) and statement in info.broadcast_lines:
                check_broadcast(frame, info, statement)
            return count

        return statement_started

    def _iteration_hook(self) -> Callable[[FrameType, CodeInfo, int], None]:
        """``loop_iterated(frame, info, header)``: the loop ``header`` ran again right after
        itself (its body's line events are switched off): count the hit, and let ``_read``
        read or count what the header stored (the loop variable) on its last hit."""
        read = self._read

        def loop_iterated(frame: FrameType, info: CodeInfo, header: int) -> None:
            hits = info.hits
            hit = hits.get(header, 0)
            hits[header] = hit + 1
            names = info.stores.get(header)
            if names is not None:
                read(frame, info, header, names, hit)

        return loop_iterated

    def frame_returned(
        self, frame: FrameType, info: CodeInfo, previous: int, value: Any, *, yielded: bool
    ) -> None:
        """``frame`` returned ``value`` (or yielded it, and will resume at the same statement)
        while running statement ``previous``."""
        if self._watched:
            self._end_watch(frame)
        if not yielded and previous in info.loop_headers:
            info.loop_exits[previous] = info.loop_exits.get(previous, 0) + 1
        if not yielded and previous in info.stores:
            self._read(frame, info, previous, info.stores[previous], info.hits.get(previous, 0))
        if (
            not yielded
            and (info.stale or info.switched_off)
            and (info.is_module or self._rarely_called(info))
        ):
            self._read_last_values(frame, info)
        if value is not None and previous != NO_STATEMENT:
            line = frame.f_lineno
            self._record_value(
                info, info.statement_of.get(line, line), "<yield>" if yielded else "<return>", value
            )

    def exception_raised(self, frame: FrameType, info: CodeInfo, exc: BaseException | None) -> None:
        """``exc`` was raised in ``frame`` (or passes through it): its running statement did
        not complete. Explains a shape or dtype error, reported if the run ends with it."""
        if self._watched:
            self._end_watch(frame)
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

    def on_news(self, listener: Callable[[], None]) -> None:
        """Call ``listener()`` whenever a read sees something new (the module tree wakes)."""
        self._news_listeners.append(listener)

    def pace_of(self, frame: FrameType | None) -> tuple[dict[int, int], dict[int, int], int] | None:
        """What paces a call made by ``frame``: the innermost user frame from it outwards,
        the statement it runs, and the statement that counts that one's hits (its loop
        header or def line; itself where nothing encloses it): that statement's file hit
        and loop-exit tables and line. Those are exact on both backends (never switched
        off)."""
        codes = self.codes
        while frame is not None:
            info = codes.get(id(frame.f_code))
            if info is not None:
                statement = info.statement_of.get(frame.f_lineno, frame.f_lineno)
                return info.hits, info.loop_exits, info.counter_of.get(statement, statement)
            frame = frame.f_back
        return None

    def switch_off(self, info: CodeInfo, statement: int, count: int, generation: int) -> bool:
        """Whether a backend that can stop a line's events (sys.monitoring) may stop those of
        ``statement`` after its ``count``-th hit; if so, its hits are estimated from then on.
        Only a statement past its dense hits, whose values stayed the same, inside a loop or a
        function (whose header or calls keep being counted), never a loop header.
        ``generation`` tells the backend's re-arms apart (see ``CodeInfo.switched_off``)."""
        counter = info.counter_of.get(statement)
        if counter is None or count <= DENSE_HITS or statement in info.loop_headers:
            return False
        if statement in info.stores and info.capture_at.get(statement, 0) <= count + 1:
            return False  # read on its next hits: something changed lately
        info.switched_off[statement] = generation
        self.recorder.switch_off(info.file, statement, counter)
        return True

    def switch_on(self, info: CodeInfo, statement: int) -> None:
        """The backend reports ``statement`` again (re-armed): the estimate becomes its count,
        and its values are read on this hit."""
        del info.switched_off[statement]
        self.recorder.switch_on(info.file, statement)
        info.capture_at[statement] = 0

    def mark_sampled(self, info: CodeInfo, statement: int) -> None:
        """The backend stops reporting ``statement`` (sampling): its counts are lower bounds."""
        self.recorder.mark_sampled(info.file, statement)

    def conclude(self, exc: BaseException | None) -> None:
        """The run ended with ``exc``: report the mismatch finding it caused, if any."""
        for key, findings in self._pending_errors:
            if exc is not None and key == (id(exc), type(exc)):
                for finding in findings:
                    self.recorder.add_finding(finding)
        self._pending_errors = []

    # -- library warnings (both backends) ----------------------------------------------
    def start_listening(self) -> None:
        """Place library warnings (torch's) on the user's line; call when tracing starts."""
        if self.findings.warnings:
            self._warnings.start()

    def stop_listening(self) -> None:
        self._warnings.stop()

    # -- recording -----------------------------------------------------------------------
    def _read(
        self,
        frame: FrameType,
        info: CodeInfo,
        line: int,
        names: tuple[str, ...],
        hit: int,
        *,
        arguments: bool = False,
    ) -> None:
        """Statement ``line`` completed its ``hit``-th hit: read what it stored, or only count
        it when this hit is not sampled."""
        if hit < info.capture_at.get(line, 0):
            table = info.stats.get(line)
            if table:
                for name, stats in table.items():
                    if name[0] != "<":  # not a <return>/<yield> recorded on the line
                        stats.hits += 1
            info.stale.add(line)
            return
        info.stale.discard(line)
        if self._capture(frame, info, line, names, arguments):
            info.dense_until[line] = hit + DENSE_HITS
            for listener in self._news_listeners:
                listener()
        dense = hit < info.dense_until.get(line, DENSE_HITS)
        info.capture_at[line] = hit + 1 if dense else hit + SAMPLE_GAP

    def _rarely_called(self, info: CodeInfo) -> bool:
        return info.hits.get(info.def_line, 0) <= DENSE_HITS

    def _read_last_values(self, frame: FrameType, info: CodeInfo) -> None:
        """The frame ends: read the last values of the statements skipped since their last
        read, where no other statement stores the same names (hits are counted already)."""
        unread = (info.stale | info.switched_off.keys()) & info.unique_stores
        for line in unread:
            info.stale.discard(line)
            self._capture(frame, info, line, info.stores[line], False, counted=True)

    def _capture(
        self,
        frame: FrameType,
        info: CodeInfo,
        line: int,
        names: tuple[str, ...],
        arguments: bool,
        *,
        counted: bool = False,
    ) -> bool:
        """Record the values of ``names`` on ``line``; whether any was new (shape, dtype,
        device, type). ``counted``: this hit was counted already."""
        try:
            scope = frame.f_locals
        except Exception:
            return False
        table = info.stats.get(line)
        if table is None:
            table = info.stats[line] = {}
        self._capturing = frame
        kinds = values.kind_of_type
        changed = False
        targets = info.target_stores.get(line, ())
        with self.recorder.lock:  # the flusher thread never reads a record half-updated
            for name in names:
                if "." in name:
                    value = _attribute_path(scope, frame, name)
                else:
                    value = scope.get(name, _MISSING)
                    if value is _MISSING and name in info.global_names:
                        value = frame.f_globals.get(name, _MISSING)
                if value is _MISSING:
                    continue
                kind = kinds.get(type(value))
                if kind is None:
                    kind = values.classify(value)
                # What a store into an attribute or an item holds was made elsewhere (and
                # checked there); `logits[logits < v] = -inf` is top-k sampling, not a bug.
                checked = name not in targets
                if kind and self._observe(
                    info, table, line, name, value, kind, arguments, 0, counted, checked
                ):
                    changed = True
        return changed

    def _record_value(self, info: CodeInfo, line: int, name: str, value: Any) -> None:
        self._capturing = None  # a returned value: no statement inputs to read
        kind = values.kind_of(value)
        if kind:
            table = info.stats.get(line)
            if table is None:
                table = info.stats[line] = {}
            with self.recorder.lock:
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
        counted: bool = False,
        checked: bool = True,
    ) -> bool:
        """Record one value; whether it was new (shape, dtype, device or type). ``checked``:
        scan it for NaN/Inf."""
        if kind in values.CONTAINER_KINDS:
            changed = False
            if depth < values.MAX_CONTAINER_DEPTH:
                for entry, item in values.container_entries(name, value, kind):
                    item_kind = values.kind_of(item)
                    if item_kind == values.NUMBER:
                        continue  # a number inside a container: not a name the user bound
                    if item_kind and self._observe(
                        info, table, line, entry, item, item_kind, argument, depth + 1, counted,
                        checked,
                    ):  # fmt: skip
                        changed = True
            return changed
        tp = type(value)
        if kind == values.NUMBER and name == "_":
            return False  # the throwaway name (`for _ in range(n)`) says nothing
        stats = table.get(name)
        changed = stats is None or stats.type is not tp
        if stats is None:
            stats = table[name] = self.recorder.new_stats(info.file, line, name, tp)
            stats.is_argument = argument
        stats.type = tp
        # The hit is counted last, once everything it read is in place: the flusher thread
        # sends a record when its hits changed, and must not send one half-updated for good.
        hit = stats.hits + 1 if not counted or stats.hits == 0 else stats.hits
        if kind == values.NUMBER:
            # Only a new type counts as a change: a counter's every value would keep the
            # line read densely. Values are never checked for NaN/Inf (`best = float("inf")`).
            stats.note_number(value)
            stats.remember(value, hit)
            stats.hits = hit
            return changed
        dtype, device = stats.dtype, stats.device
        try:
            if kind == values.TORCH:
                stats.dtype = value.dtype
                stats.device = value.device
                requires_grad = value.requires_grad
                if requires_grad is not stats.requires_grad and stats.requires_grad is not None:
                    stats.grad_varied = True  # trained and evaluated: neither is the story
                stats.requires_grad = requires_grad
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
        if shape is not None and not shape:
            _remember_scalar(stats, value, kind, self.scalars_on_gpu, hit)
        if shape != stats.shape:
            stats.shape = shape
            shapes = stats.shapes
            if shape is not None:
                stats.widen(shape)
            if shape is not None and shape not in shapes:
                changed = True
                if len(shapes) < MAX_SHAPES:
                    shapes.append(shape)
            stats.count_shape(shapes.index(shape) if shape in shapes else -1, hit)
        if dtype != stats.dtype or device != stats.device:
            changed = True
        if tp not in self._unweakrefable:
            try:
                stats.ref = weakref.ref(value)
            except TypeError:
                self._unweakrefable.add(tp)
        stats.hits = hit
        if checked and self._nonfinite and hit >= stats.next_nonfinite_check:
            stats.next_nonfinite_check = hit * 2
            self._check_nonfinite(stats, value, kind)
        return changed

    # -- findings --------------------------------------------------------------------------
    def _check_nonfinite(self, stats: VarStats, value: Any, kind: int) -> None:
        config = self.findings
        state = nonfinite_state(value, kind, config.nonfinite_max_elements, config.nonfinite_on_gpu)
        if state is None:
            return
        frame, self._capturing = self._capturing, None
        inputs = self._statement_inputs(frame, stats.line, value) if frame is not None else []
        if state == "Inf" and self._is_mask(stats, value, inputs, frame):
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

    def _names_an_infinity(self, stats: VarStats, frame: FrameType) -> bool:
        """The statement names a Python float that is ±inf (a constant such as NEG_INF)."""
        info = self.known(frame.f_code)
        statement = info.source.statements.get(stats.line) if info is not None else None
        if statement is None:
            return False
        scope, globals_ = frame.f_locals, frame.f_globals
        for node in ast.walk(statement):
            if isinstance(node, ast.Name):
                value = scope.get(node.id, globals_.get(node.id))
                if isinstance(value, float) and math.isinf(value):
                    return True
        return False

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

    def _is_mask(
        self,
        stats: VarStats,
        value: Any,
        inputs: list[tuple[str, Any]],
        frame: FrameType | None,
    ) -> bool:
        """An Inf that is a mask: made by masked_fill/where/an inf literal, the log of a 0/1
        tensor, or carried over from an input that held it already."""
        text = self.sources.get(stats.file).statement_text(stats.line)
        if is_mask_text(text) or (takes_log(text) and holds_only_zero_or_inf(value)):
            return True
        if frame is not None and self._names_an_infinity(stats, frame):
            return True  # `torch.full((k,), NEG_INF)` with NEG_INF = float("-inf")
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

    def _end_watch(self, frame: FrameType) -> None:
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
        # Shaping where the value was born (not in the expression) is a weaker sign: a loss
        # of it still fires (`y = t.view(-1, 1)` ... `((pred - y) ** 2).mean()`).
        born = line_shaping(self.sources.get(origin.file).statement_text(origin.line))
        return min(born, KEEPDIM)

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
        if issuer is frame and _calls_warn(info.source.statements.get(line)):
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
            return declared_in_class(self.sources, self.scope, owner, name)

        return declared_at


# Frames of the warnings machinery and of ShapeLens itself, skipped to find who warned.
_OWN_FILES = (warnings.__file__, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


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


def _calls_warn(statement: ast.AST | None) -> bool:
    """The statement calls ``warnings.warn`` (or a bare ``warn``) itself."""
    if statement is None:
        return False
    for node in ast.walk(statement):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name in ("warn", "warn_explicit", "showwarning"):
                return True
    return False


def _attribute_path(scope: dict[str, Any], frame: FrameType, path: str) -> Any:
    """``self.fc.weight`` read from the frame without running user code (no properties, no
    ``__getattr__``: ``values.safe_attribute``); ``_MISSING`` when any step is not found."""
    first, *rest = path.split(".")
    value = scope.get(first, _MISSING)
    if value is _MISSING:
        value = frame.f_globals.get(first, _MISSING)
    for attr in rest:
        if value is _MISSING:
            return _MISSING
        value = values.safe_attribute(value, attr)
        if value is None:
            return _MISSING
    return value


def _remember_scalar(stats: VarStats, value: Any, kind: int, on_gpu: bool, hit: int) -> None:
    """A 0-dim tensor or array (a loss) on the CPU: its value joins the history. One on
    another device only when ``on_gpu`` (reading it synchronises the device; a meta or fake
    tensor has no value); complex values have no order."""
    try:
        if kind == values.TORCH:
            device = value.device.type
            if device != "cpu" and not (on_gpu and device != "meta"):
                return
            if value.dtype.is_complex:
                return
            stats.remember(float(value.item()), hit)
        elif getattr(value.dtype, "kind", "") in ("b", "i", "u", "f"):
            stats.remember(float(value), hit)
    except Exception:
        return
