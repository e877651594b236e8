"""The ``sys.monitoring`` backend (Python 3.12+): reports the same frame events as the
settrace tracer to the
:class:`~shapelens.engine.recording.statement_recorder.StatementRecorder`, at a fraction of
its cost.

Only user code objects get LINE/PY_RETURN/PY_YIELD events (``set_local_events``); every other
code object's PY_START returns ``DISABLE`` once and never calls us again. With sampling on,
a line's event is disabled after ``sample_hits`` hits and the line is marked sampled (its
counts are then lower bounds): a hot loop runs at full speed once every line has been seen
enough. Another tool's ``restart_events()`` re-enables those lines; their next event simply
returns ``DISABLE`` again. Tool id 3 or 4: 0 is debugpy's, 2 cProfile's.

While a library module loads and no other thread runs, the tool's global events (PY_START,
RAISE, PY_UNWIND) are off (:mod:`shapelens.engine.backends.untraced_imports`): ``import
torch`` and its lazy ``torch._dynamo`` start 14,000 code objects and raise or unwind 60,000
exceptions of their own, each a callback of ours (+0.3 s on 2.4 s).
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Callable
from types import CodeType, FrameType
from typing import Any

from shapelens.engine import OUR_THREADS
from shapelens.engine.backends.faults import fault_text
from shapelens.engine.backends.untraced_imports import UntracedImports
from shapelens.engine.modules.tree import OnRearm, OnReturn
from shapelens.engine.recording.sampling import DENSE_HITS, REARM_INTERVAL_S
from shapelens.engine.recording.statement_recorder import NO_STATEMENT, StatementRecorder

TOOL_IDS = (3, 4, 5)


class MonitoringTracer:
    """Drives a :class:`StatementRecorder` recorder from ``sys.monitoring`` events."""

    def __init__(
        self, events: StatementRecorder, *, sample_hits: int | None = None, adaptive: bool = True
    ) -> None:
        self.events = events
        self.sample_hits = sample_hits
        self.adaptive = adaptive
        # A line is disabled once its hit count reaches this (never without sampling).
        self._limit = sys.maxsize if sample_hits is None else max(sample_hits, 1)
        self._info = events.info_for
        self._started = events.statement_started
        self._tool: int | None = None
        self._enabled: set[CodeType] = set()
        self._previous: dict[int, int] = {}  # id(frame) -> statement it is running
        self._watched: CodeType | None = None
        self._on_watched: Callable[[FrameType, Any], None] | None = None
        self._watch_paused = False
        self._rearm_listeners: list[Callable[[], None]] = []
        self._rearm_at = [0.0]  # when the switched-off lines are next switched on
        self._generation = [0]  # how many times they were
        self._call_check: Callable[[Any, Any], bool] | None = None
        self._user_events = 0  # the local events of user code (set when started)
        self._imports = UntracedImports(
            lambda path: events.scope.user_file(path) is not None,
            self._pause_for_import,
            self._resume_after_import,
        )
        self._paused_for_import = False
        self._halted = False  # after an error of ours (:meth:`_faulted`): nothing turns on

    # -- lifecycle ---------------------------------------------------------------------
    def start(self) -> None:
        monitoring = sys.monitoring  # type: ignore[attr-defined,unused-ignore]
        events = monitoring.events
        tool = next((t for t in TOOL_IDS if monitoring.get_tool(t) is None), None)
        if tool is None:
            raise RuntimeError("no free sys.monitoring tool id (3, 4 and 5 are taken)")
        monitoring.use_tool_id(tool, "shapelens")
        for event, callback in (
            (events.PY_START, self._on_start),
            (events.LINE, self._line_callback()),
            (events.PY_RETURN, self._on_return),
            (events.PY_YIELD, self._on_yield),
            (events.RAISE, self._on_raise),
            (events.PY_UNWIND, self._on_unwind),
            (events.CALL, self._on_call),
        ):
            monitoring.register_callback(tool, event, callback)
        self._tool = tool
        self._set_global_events(True)
        self._user_events = events.LINE | events.PY_RETURN | events.PY_YIELD
        if self._call_check is not None:
            self._user_events |= events.CALL
        if self._watched is not None:
            self._watch(self._watched)
        if self.adaptive:  # a shape varied: the lines it goes through are read again now
            self.events.on_news(lambda: self._rearm(time.monotonic()), varied=True)
        self.events.start_listening()
        self._imports.install()

    def _set_global_events(self, on: bool) -> None:
        """Exceptions are global events only (their callbacks return at once for other code);
        off, with PY_START, while a library module loads."""
        if self._tool is None or self._halted:
            return
        events = sys.monitoring.events  # type: ignore[attr-defined,unused-ignore]
        wanted = events.PY_START | events.RAISE | events.PY_UNWIND if on else 0
        sys.monitoring.set_events(self._tool, wanted)  # type: ignore[attr-defined,unused-ignore]

    def _pause_for_import(self) -> None:
        """The tool's events are global: off, they are off for every thread, and user code
        another thread starts meanwhile would go unseen (a whole ``train()``). So only while
        no other thread of the program runs (ours, the flusher, run none of its code)."""
        current = threading.current_thread()
        if all(t is current or t.name.startswith(OUR_THREADS) for t in threading.enumerate()):
            self._paused_for_import = True
            self._set_global_events(False)

    def _resume_after_import(self) -> None:
        if self._paused_for_import:
            self._paused_for_import = False
            self._set_global_events(True)

    def stop(self) -> None:
        tool = self._tool
        if tool is None:
            return
        self._tool = None
        self.events.stop_listening()
        self._events_off(tool)
        self._enabled.clear()
        sys.monitoring.free_tool_id(tool)  # type: ignore[attr-defined,unused-ignore]

    def _events_off(self, tool: int) -> None:
        """No more events of ours in any thread, and library imports untouched."""
        self._imports.remove()
        monitoring = sys.monitoring  # type: ignore[attr-defined,unused-ignore]
        monitoring.set_events(tool, 0)
        for code in list(self._enabled):  # a copy: another thread may start user code
            monitoring.set_local_events(tool, code, 0)

    def _faulted(self, err: Exception, frame: FrameType | None) -> None:
        """An error of ours in a callback (:mod:`.faults`): tracing stops, and the run says
        why. The tool's events go off for every thread; :meth:`stop` frees it later."""
        self.events.records.note_fault(fault_text(err, frame))
        tool = self._tool
        if tool is None or self._halted:
            return
        self._halted = True
        with contextlib.suppress(Exception):
            self._events_off(tool)

    def forked(self) -> None:
        """In a forked child of user code: tracing off there for good. Called from an
        at-fork hook, which must not fail the user's fork."""
        with contextlib.suppress(Exception):
            self.stop()

    def watch_returns(self, code: CodeType, on_return: OnReturn, on_rearm: OnRearm) -> None:
        """``on_return(frame, value)`` when a frame of ``code`` (library code) returns; not
        when it ends by an exception. Only its PY_RETURN event is switched on. ``on_rearm()``
        when the switched-off lines are re-armed."""
        self.events.info_for(code)  # known as not ours
        self._on_watched = on_return
        self._watched = code
        self._rearm_listeners.append(on_rearm)
        if self._tool is not None:
            self._watch(code)

    def check_calls(self, check: Callable[[Any, Any], bool]) -> None:
        """``check(callee, first_argument)`` on the CALL events of user code; a call site
        whose check says False is disabled until the lines are re-armed."""
        self._call_check = check
        if self._tool is None or self._halted:
            return
        self._user_events |= sys.monitoring.events.CALL  # type: ignore[attr-defined,unused-ignore]
        for code in self._enabled:  # user code that started before
            if code is not self._watched:
                sys.monitoring.set_local_events(self._tool, code, self._user_events)  # type: ignore[attr-defined,unused-ignore]

    def pause_returns(self) -> bool:
        """Switch the watched code's PY_RETURN event off (it costs nothing then)."""
        if self._tool is None or self._watched is None:
            return False
        sys.monitoring.set_local_events(self._tool, self._watched, 0)  # type: ignore[attr-defined,unused-ignore]
        self._watch_paused = True
        return True

    def resume_returns(self) -> None:
        self._watch_paused = False
        if self._tool is not None and self._watched is not None:
            self._watch(self._watched)

    def _watch(self, code: CodeType) -> None:
        if self._watch_paused or self._halted:
            return
        events = sys.monitoring.events  # type: ignore[attr-defined,unused-ignore]
        sys.monitoring.set_local_events(self._tool, code, events.PY_RETURN)  # type: ignore[attr-defined,unused-ignore]
        self._enabled.add(code)

    def __enter__(self) -> MonitoringTracer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- callbacks -------------------------------------------------------------------------
    def _on_start(self, code: CodeType, offset: int) -> Any:
        try:
            info = self._info(code)
            if info is None:
                return sys.monitoring.DISABLE  # type: ignore[attr-defined,unused-ignore]
            if code not in self._enabled:
                sys.monitoring.set_local_events(self._tool, code, self._user_events)  # type: ignore[attr-defined,unused-ignore]
                self._enabled.add(code)
            frame = sys._getframe(1)
            info.started(frame, threading.get_ident())
            self._previous[id(frame)] = NO_STATEMENT
            self.events.enter_call(frame, info)
            return None
        except Exception as err:  # ours: never the program's (see .faults)
            self._faulted(err, sys._getframe(1))
            return None

    def _rearm(self, now: float) -> None:
        """Switch the switched-off lines on again (they read their next hit)."""
        self._rearm_at[0] = now + REARM_INTERVAL_S
        self._generation[0] += 1
        sys.monitoring.restart_events()  # type: ignore[attr-defined,unused-ignore]
        for listener in self._rearm_listeners:
            listener()

    def _line_callback(self) -> Callable[[CodeType, int], Any]:
        """The LINE callback, the hottest path: a closure over what it reads, so each event
        costs a few dictionary lookups (no attribute lookups, no extra calls)."""
        codes = self.events.codes
        info_for = self._info
        previous_of = self._previous
        started = self._started
        getframe = sys._getframe
        limit = self._limit
        adaptive = self.adaptive
        monitoring = sys.monitoring  # type: ignore[attr-defined,unused-ignore]
        disable = monitoring.DISABLE
        line_off = self.events.lines.line_off
        switch_on = self.events.lines.switch_on
        iterated = self.events.loop_iterated
        probe_loss = self.events.reader.probe_loss
        clock = time.monotonic
        rearm_at = self._rearm_at
        rearm_at[0] = clock() + REARM_INTERVAL_S
        generation = self._generation  # how many re-arms so far
        faulted = self._faulted

        def on_line(code: CodeType, line: int) -> Any:
            try:
                info = codes.get(id(code))
                if info is None:
                    info = info_for(code)
                    if info is None:
                        return disable
                statement = info.statement_of.get(line, line)
                frame = getframe(1)
                key = id(frame)
                previous = previous_of.get(key, NO_STATEMENT)
                if statement == previous:
                    # A loop header's own line again: a new iteration, its body switched off.
                    if line != statement or statement not in info.loop_headers:
                        return None
                    now = clock()
                    if now < rearm_at[0]:
                        iterated(frame, info, statement)
                        return None
                    self._rearm(now)  # look at the switched-off lines again
                off_since = info.switched_off.get(statement)
                if off_since is not None:
                    probed = info.probe_at.get(statement)
                    if probed is not None:
                        # After a loss: only probe it, before the optimizer steps. Its hits are
                        # estimated, and the frame's statement stays the last one reported, so
                        # the loop header's next event is still a cheap new iteration.
                        probe_loss(frame, info, probed)
                        return None
                    if off_since == generation[0]:
                        return disable  # another line of a statement switched off: off too
                    switch_on(info, statement)
                previous_of[key] = statement
                count = started(frame, info, previous, statement)
                if (
                    count >= limit or (count > DENSE_HITS and statement not in info.loop_headers)
                ) and line_off(info, previous, statement, count, generation[0], limit, adaptive):
                    return disable
                return None
            except Exception as err:  # ours: never the program's (see .faults)
                faulted(err, getframe(1))
                return None

        return on_line

    def _on_return(self, code: CodeType, offset: int, value: Any) -> Any:
        try:
            info = self._info(code)
            if info is None:
                if code is self._watched and self._on_watched is not None:
                    self._on_watched(sys._getframe(1), value)
                return None
            frame = sys._getframe(1)
            previous = self._previous.pop(id(frame), NO_STATEMENT)
            self.events.frame_returned(frame, info, previous, value, yielded=False)
            return None
        except Exception as err:  # ours: never the program's (see .faults)
            self._faulted(err, sys._getframe(1))
            return None

    def _on_call(self, code: CodeType, offset: int, callee: Any, first: Any) -> Any:
        try:
            check = self._call_check
            if check is None or not check(callee, first):
                return sys.monitoring.DISABLE  # type: ignore[attr-defined,unused-ignore]
            return None
        except Exception as err:  # ours: never the program's (see .faults)
            self._faulted(err, sys._getframe(1))
            return None

    def _on_yield(self, code: CodeType, offset: int, value: Any) -> Any:
        try:
            info = self._info(code)
            if info is None:
                return None
            frame = sys._getframe(1)
            previous = self._previous.get(id(frame), NO_STATEMENT)  # resumes at that statement
            self.events.frame_returned(frame, info, previous, value, yielded=True)
            return None
        except Exception as err:  # ours: never the program's (see .faults)
            self._faulted(err, sys._getframe(1))
            return None

    def _on_raise(self, code: CodeType, offset: int, exc: BaseException) -> Any:
        try:
            info = self.events.known(code)
            if info is None:
                return None
            frame = sys._getframe(1)
            if not info.ended_its_loop(exc, self._previous.get(id(frame), NO_STATEMENT)):
                self._previous[id(frame)] = NO_STATEMENT  # the running statement did not complete
            self.events.exception_raised(frame, info, exc)
            return None
        except Exception as err:  # ours: never the program's (see .faults)
            self._faulted(err, sys._getframe(1))
            return None

    def _on_unwind(self, code: CodeType, offset: int, exc: BaseException) -> Any:
        try:
            if self.events.known(code) is not None:
                self._previous.pop(id(sys._getframe(1)), None)
            return None
        except Exception as err:  # ours: never the program's (see .faults)
            self._faulted(err, sys._getframe(1))
            return None
