"""The ``sys.settrace`` backend, chained to any tracer already installed (debugpy, coverage).

For each frame of user code its local tracer keeps the statement that is running and
reports to the :class:`~shapelens.engine.recording.statement_recorder.StatementRecorder`
when the frame moves to another statement, returns or yields, or sees an exception; the
recording is done there.

With the C gate (3.11), hot lines are switched off as under sys.monitoring: once a
statement's hits can be estimated (``LineSwitches.line_off``), the gate drops its line
events in C, and its loop header's events count the iterations; every
:data:`~shapelens.engine.recording.sampling.REARM_INTERVAL_S`, and when a shape varies, all
lines are switched on again and read their next hit.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Callable
from types import CodeType, FrameType
from typing import Any

from shapelens.engine.backends.faults import fault_text
from shapelens.engine.backends.library_gate import Gate, GateType
from shapelens.engine.backends.untraced_imports import UntracedImports
from shapelens.engine.modules.tree import OnRearm, OnReturn
from shapelens.engine.recording.sampling import DENSE_HITS, REARM_INTERVAL_S
from shapelens.engine.recording.statement_recorder import NO_STATEMENT, CodeInfo, StatementRecorder

TraceFunction = Callable[[FrameType, str, Any], Any]
GlobalTrace = Callable[[FrameType, str, Any], TraceFunction | None]

_MISSING = object()


class Tracer:
    """Drives a :class:`StatementRecorder` recorder from ``sys.settrace`` events.

    ``gate``: the C gate's type where the backend's choice says to use it
    (:func:`~shapelens.engine.backends.choice.choose_backend`); it is used when nothing traced
    before ``start()`` (a debugger's tracer is chained to instead). With it, ``adaptive``
    switches hot lines off in the thread that started tracing (see the module's doc), and
    ``sample_hits`` switches each line off after that many hits (its counts: lower bounds)."""

    def __init__(
        self,
        events: StatementRecorder,
        *,
        gate: GateType | None,
        adaptive: bool = True,
        sample_hits: int | None = None,
    ) -> None:
        self.events = events
        self._gate_type = gate
        self.adaptive = adaptive
        self._limit = sys.maxsize if sample_hits is None else max(sample_hits, 1)
        self._codes = events.codes
        self._previous: Any = None
        self._previous_threading: Any = None
        self._installed: TraceFunction | None = None
        self._gate: Gate | None = None
        """Installed instead of ``_installed`` in the tracing thread when nothing traced
        before us: tracing off while library code runs (see library_gate)."""
        self._watched: CodeType | None = None
        self._watched_tracer: TraceFunction | None = None
        self._watch_paused = False
        self._call_check: Callable[[Any, Any], bool] | None = None
        self._halted = False  # after an error of ours (:meth:`_faulted`): no frame is entered
        self._gate_thread: int | None = None  # where the gate switches lines off
        self._rearm_listeners: list[OnRearm] = []
        self._rearm_at = [0.0]  # when the switched-off lines are next switched on
        self._generation = [0]  # how many times they were
        self._imports = UntracedImports(
            lambda path: events.scope.user_file(path) is not None, self._uninstall, self._resume
        )

    # -- lifecycle ---------------------------------------------------------------------
    def start(self) -> None:
        self._previous = sys.gettrace()
        self._previous_threading = threading.gettrace()
        ours = self._global_function()
        installed = ours if self._previous is None else self._chained(self._previous, ours)
        self._installed = installed
        if self._previous is None and self._gate_type is not None:
            self._gate = self._gate_type(self._codes, ours)
            if self._watched is not None:
                self._gate.watch(self._watched)
                self._gate.pause_watch(self._watch_paused)
            self._gate_thread = threading.get_ident()
            self._rearm_at[0] = time.monotonic() + REARM_INTERVAL_S
            if self.adaptive:  # a shape varied: the lines it goes through are read again now
                self.events.on_news(lambda: self._rearm(time.monotonic()), varied=True)
        threading.settrace(installed)  # other threads: sys.settrace, as before
        self._install()
        self.events.start_listening()
        self._imports.install()

    def _install(self) -> None:
        if self._gate is not None:
            self._gate.install()
        else:
            _settrace(self._installed)

    def _uninstall(self) -> None:
        if self._gate is not None:
            self._gate.uninstall()
        _settrace(self._previous)  # a chained tracer (debugpy) keeps tracing

    def _uninstall_for_good(self) -> None:
        self._uninstall()
        if self._gate is not None:
            self._gate.remove()
            self._gate = None

    def _resume(self) -> None:
        if self._installed is not None:  # not after forked()
            self._install()

    def forked(self) -> None:
        """In a forked child of user code: tracing is off there for good (an import must not
        resume it), and the import function is the original again."""
        self._installed = None
        self._imports.remove()
        self._uninstall_for_good()
        _settrace(None)
        threading.settrace(None)

    def _faulted(self, err: Exception, frame: FrameType) -> None:
        """An error of ours in a trace function (:mod:`.faults`): tracing stops, and the run
        says why. No frame is entered from now on, and this thread's traced frames are let go
        (other threads' let go of theirs as they return)."""
        self.events.records.note_fault(fault_text(err, frame))
        self._halted = True
        with contextlib.suppress(Exception):
            _let_go(frame)

    def stop(self) -> None:
        """Restore the tracers that were there before, and detach from running frames."""
        self._imports.remove()
        self.events.stop_listening()
        self._uninstall_for_good()
        threading.settrace(self._previous_threading)
        _let_go(sys._getframe())

    def __enter__(self) -> Tracer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _rearm(self, now: float) -> None:
        """Switch the switched-off lines on again (they read their next hit)."""
        self._rearm_at[0] = now + REARM_INTERVAL_S
        self._generation[0] += 1
        if self._gate is not None:
            self._gate.switch_all_on()
        for listener in self._rearm_listeners:
            listener()

    def watch_returns(self, code: CodeType, on_return: OnReturn, on_rearm: OnRearm) -> None:
        """``on_return(frame, value)`` when a frame of ``code`` (library code) returns; not
        when it ends by an exception. Its lines stay untraced. ``on_rearm()`` when the
        switched-off lines are switched on again (with the gate)."""
        self.events.info_for(code)  # known as not ours: the call event's first lookup hits
        self._rearm_listeners.append(on_rearm)

        tracer = self

        def returns_only(frame: FrameType, event: str, arg: Any) -> TraceFunction | None:
            try:
                if event == "return":
                    on_return(frame, arg)
                elif event == "exception":
                    return _ignore  # it unwinds: its "return" event carries no value
                return returns_only
            except Exception as err:  # ours: never the program's (see .faults)
                tracer._faulted(err, frame)
                return None

        self._watched_tracer = returns_only
        self._watched = code
        if self._gate is not None:
            self._gate.watch(code)

    def check_calls(self, check: Callable[[Any, Any], bool]) -> None:
        """While returns are paused, ``check(module, first_argument)`` at the call event of
        each call of the watched code (``Module.__call__``) that user code makes, before it
        runs (calls inside torch, a ``Sequential``'s children, go unchecked, as under
        sys.monitoring): the trampoline has built that frame's three locals already, so
        this costs far less than watching the call's return."""
        self._call_check = check

    def pause_returns(self) -> bool:
        """Stop watching returns: a watched call's frame gets no local tracer."""
        if self._call_check is None:
            return False  # nothing would wake the watcher before a new shape went by
        self._watch_paused = True
        if self._gate is not None:
            self._gate.pause_watch(True)
        return True

    def resume_returns(self) -> None:
        self._watch_paused = False
        if self._gate is not None:
            self._gate.pause_watch(False)

    # -- global trace functions ----------------------------------------------------------
    def _global_function(self) -> GlobalTrace:
        """The global trace function: called on every call event of the program (~100 per
        training step in torch's code alone), so a closure over what it reads."""
        codes_get = self._codes.get
        info_for = self.events.info_for
        enter = self._enter
        missing = _MISSING
        tracer = self

        def trace(frame: FrameType, event: str, arg: Any) -> TraceFunction | None:
            try:
                code = frame.f_code
                info = codes_get(id(code), missing)
                if info is None:
                    if code is tracer._watched and not tracer._halted:
                        if tracer._watch_paused:
                            caller = frame.f_back  # user code calls a module: as on 3.12+
                            if caller is not None and codes_get(id(caller.f_code)) is not None:
                                tracer._check_call(frame)  # may resume the watch for this call
                            if tracer._watch_paused:
                                return None
                        frame.f_trace_lines = False
                        return tracer._watched_tracer
                    return None
                if info is missing:
                    info = info_for(code)
                    if info is None:
                        return None
                if tracer._halted:
                    return None
                return enter(frame, info)  # type: ignore[arg-type]
            except Exception as err:  # ours: never the program's (see .faults)
                tracer._faulted(err, frame)
                return None

        return trace

    def _check_call(self, frame: FrameType) -> None:
        check = self._call_check
        if check is None:
            return
        local = frame.f_locals
        args = local.get("args")
        check(local.get("self"), args[0] if type(args) is tuple and args else None)

    def _chained(self, previous: TraceFunction, ours: GlobalTrace) -> TraceFunction:
        """Call the previous tracer (debugpy, coverage) and ours, keeping both local tracers."""

        def chained(frame: FrameType, event: str, arg: Any) -> TraceFunction | None:
            theirs = previous(frame, event, arg)
            lines = frame.f_trace_lines
            mine = ours(frame, event, arg)
            if mine is None:
                return theirs  # type: ignore[no-any-return]
            if theirs is None:
                return mine
            frame.f_trace_lines = lines  # a watched frame: their tracer may want its lines
            return _both(theirs, mine)

        return chained

    def local_tracer(self, frame: FrameType, *, record_arguments: bool) -> TraceFunction | None:
        """A local tracer for a frame another tracer chose (snoop's targets), bypassing the
        scope; ``record_arguments`` is false for frames entered mid-way (``with`` blocks)."""
        info = self.events.info_unscoped(frame.f_code)
        if info is None:
            return None
        return self._enter(frame, info, record_arguments=record_arguments)

    # -- per-frame local tracer --------------------------------------------------------
    def _enter(
        self, frame: FrameType, info: CodeInfo, record_arguments: bool = True
    ) -> TraceFunction:
        events = self.events
        statement_of = info.statement_of
        if info.is_generator and frame.f_lineno != frame.f_code.co_firstlineno:
            previous = statement_of.get(frame.f_lineno, frame.f_lineno)  # resumed after a yield
        else:
            previous = NO_STATEMENT
            if record_arguments:
                events.enter_call(frame, info)
        # Lines are switched off only through the gate, in its thread (see the module's doc);
        # a frame of any thread skips those switched off and counts its loop's iterations.
        gate = self._gate
        gate_off = None
        if gate is not None:
            thread = threading.get_ident()
            info.started(frame, thread)
            if thread == self._gate_thread:
                gate_off = gate.switch_off
        return self._local_tracer(frame.f_code, info, previous, gate_off)

    def _local_tracer(
        self,
        code: CodeType,
        info: CodeInfo,
        previous: int,
        gate_off: Callable[[CodeType, int], bool] | None,
    ) -> TraceFunction:
        """A frame's local tracer (``gate_off``: switches a line off, where this frame may)."""
        events = self.events
        tracer = self
        statement_of = info.statement_of
        started = events.statement_started
        switched_off = info.switched_off
        probe_at = info.probe_at
        loop_headers = info.loop_headers
        generation = self._generation
        rearm_at = self._rearm_at
        clock = time.monotonic
        limit = self._limit
        adaptive = self.adaptive
        line_off = events.lines.line_off
        switch_on = events.lines.switch_on
        iterated = events.loop_iterated
        probe_loss = events.reader.probe_loss

        def local(frame: FrameType, event: str, arg: Any) -> TraceFunction:
            nonlocal previous
            try:
                if event == "line":
                    line = frame.f_lineno
                    statement = statement_of.get(line, line)
                    if statement == previous:
                        # A loop header's own line again: a new iteration, its body off.
                        if line != statement or statement not in loop_headers:
                            return local
                        if gate_off is None or (now := clock()) < rearm_at[0]:
                            iterated(frame, info, statement)
                            return local
                        tracer._rearm(now)  # look at the switched-off lines again
                    elif switched_off:
                        off_since = switched_off.get(statement)
                        if off_since is not None:
                            probed = probe_at.get(statement)
                            if probed is not None:
                                probe_loss(frame, info, probed)  # as under sys.monitoring
                                return local
                            if off_since == generation[0]:
                                if gate_off is not None:  # another line of the statement
                                    gate_off(code, line)
                                return local
                            switch_on(info, statement)
                    count = started(frame, info, previous, statement)
                    if (
                        gate_off is not None
                        and (
                            count >= limit or (count > DENSE_HITS and statement not in loop_headers)
                        )
                        and line_off(
                            info, previous, statement, count, generation[0], limit, adaptive
                        )
                    ):
                        gate_off(code, line)
                    previous = statement
                elif event == "return":
                    yielded = info.is_generator and frame.f_lasti in info.yield_offsets
                    events.frame_returned(frame, info, previous, arg, yielded=yielded)
                    previous = NO_STATEMENT
                elif event == "exception":
                    exc = arg[1] if isinstance(arg, tuple) and len(arg) > 2 else None
                    if not info.ended_its_loop(exc, previous):
                        previous = NO_STATEMENT  # the running statement did not complete
                    # the traceback as it is now (exc.__traceback__ lags behind it on 3.11)
                    events.exception_raised(frame, info, exc, arg[2] if exc is not None else None)
                return local
            except Exception as err:  # ours: never the program's (see .faults)
                tracer._faulted(err, frame)
                return None  # type: ignore[return-value]

        return local


def _settrace(function: Any) -> None:
    """``sys.settrace``; under debugpy, its original (pydevd wraps sys.settrace to warn
    "should not be used", but we chain to pydevd's tracer and restore it, as it asks)."""
    holder = getattr(sys.modules.get("pydevd_tracing"), "TracingFunctionHolder", None)
    original = getattr(holder, "_original_tracing", None)
    (original if callable(original) else sys.settrace)(function)


def _let_go(frame: FrameType | None) -> None:
    """``frame`` and its callers no longer call our local tracers (other tracers' stay)."""
    while frame is not None:
        trace = frame.f_trace
        if trace is not None and getattr(trace, "__qualname__", "").startswith("Tracer."):
            frame.f_trace = None
        frame = frame.f_back


def _ignore(frame: FrameType, event: str, arg: Any) -> TraceFunction:
    return _ignore


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
