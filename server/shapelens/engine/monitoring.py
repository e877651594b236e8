"""The ``sys.monitoring`` backend (Python 3.12+): the same recording as the settrace tracer,
at a fraction of its cost.

Only user code objects get LINE/PY_RETURN/PY_YIELD events (``set_local_events``); every other
code object's PY_START returns ``DISABLE`` once and never calls us again. With sampling on,
a line's event is disabled after ``sample_hits`` hits and the line is marked sampled (its
counts are then lower bounds): a hot loop runs at full speed once every line has been seen
enough. Another tool's ``restart_events()`` re-enables those lines; their next event simply
returns ``DISABLE`` again. Tool id 3 or 4: 0 is debugpy's, 2 cProfile's.
"""

from __future__ import annotations

import sys
from types import CodeType
from typing import Any

from shapelens.engine.tracer import NO_STATEMENT, CodeInfo, Tracer

TOOL_IDS = (3, 4, 5)


class MonitoringTracer:
    """Drives a :class:`Tracer`'s recording from ``sys.monitoring`` events."""

    def __init__(self, tracer: Tracer, *, sample_hits: int | None = None) -> None:
        self.tracer = tracer
        self.sample_hits = sample_hits
        self._tool: int | None = None
        self._enabled: set[CodeType] = set()
        self._previous: dict[int, int] = {}  # id(frame) -> statement it is running

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
            (events.LINE, self._on_line),
            (events.PY_RETURN, self._on_return),
            (events.PY_YIELD, self._on_yield),
            (events.RAISE, self._on_raise),
            (events.PY_UNWIND, self._on_unwind),
        ):
            monitoring.register_callback(tool, event, callback)
        # Exceptions are global events only; their callbacks return at once for other code.
        monitoring.set_events(tool, events.PY_START | events.RAISE | events.PY_UNWIND)
        self._tool = tool
        self.tracer.start_listening()

    def stop(self) -> None:
        tool = self._tool
        if tool is None:
            return
        self._tool = None
        self.tracer.stop_listening()
        monitoring = sys.monitoring  # type: ignore[attr-defined,unused-ignore]
        monitoring.set_events(tool, 0)
        for code in self._enabled:
            monitoring.set_local_events(tool, code, 0)
        self._enabled.clear()
        monitoring.free_tool_id(tool)

    def conclude(self, exc: BaseException | None) -> None:
        self.tracer.conclude(exc)

    def __enter__(self) -> MonitoringTracer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- callbacks -------------------------------------------------------------------------
    def _info(self, code: CodeType) -> CodeInfo | None:
        return self.tracer.info_for(code)

    def _on_start(self, code: CodeType, offset: int) -> Any:
        info = self._info(code)
        if info is None:
            return sys.monitoring.DISABLE  # type: ignore[attr-defined,unused-ignore]
        if code not in self._enabled:
            events = sys.monitoring.events  # type: ignore[attr-defined,unused-ignore]
            local = events.LINE | events.PY_RETURN | events.PY_YIELD
            sys.monitoring.set_local_events(self._tool, code, local)  # type: ignore[attr-defined,unused-ignore]
            self._enabled.add(code)
        frame = sys._getframe(1)
        self._previous[id(frame)] = NO_STATEMENT
        self.tracer.enter_call(frame, info)
        return None

    def _on_line(self, code: CodeType, line: int) -> Any:
        info = self._info(code)
        if info is None:
            return sys.monitoring.DISABLE  # type: ignore[attr-defined,unused-ignore]
        statement = info.statement_of.get(line, line)
        frame = sys._getframe(1)
        key = id(frame)
        previous = self._previous.get(key, NO_STATEMENT)
        if statement == previous:
            return None
        if self.tracer._watched:
            self.tracer.end_watch(frame)
        if previous in info.stores:
            self.tracer._capture(frame, info, previous, info.stores[previous], False)
        self._previous[key] = statement
        disable = False
        if statement not in info.definitions:
            count = info.hits.get(statement, 0) + 1
            info.hits[statement] = count
            if self.sample_hits is not None and count >= self.sample_hits:
                self.tracer.recorder.mark_sampled(info.file, statement)
                disable = True
        if statement in info.broadcast_lines:
            self.tracer._check_broadcast(frame, info, statement)
        return sys.monitoring.DISABLE if disable else None  # type: ignore[attr-defined,unused-ignore]

    def _on_return(self, code: CodeType, offset: int, value: Any) -> Any:
        info = self._info(code)
        if info is None:
            return None
        frame = sys._getframe(1)
        if self.tracer._watched:
            self.tracer.end_watch(frame)
        previous = self._previous.pop(id(frame), NO_STATEMENT)
        if previous in info.stores:
            self.tracer._capture(frame, info, previous, info.stores[previous], False)
        if value is not None and previous != NO_STATEMENT:
            line = frame.f_lineno
            self.tracer._record_value(info, info.statement_of.get(line, line), "<return>", value)
        return None

    def _on_yield(self, code: CodeType, offset: int, value: Any) -> Any:
        info = self._info(code)
        if info is None:
            return None
        frame = sys._getframe(1)
        if value is not None:
            line = frame.f_lineno
            self.tracer._record_value(info, info.statement_of.get(line, line), "<yield>", value)
        return None

    def _on_raise(self, code: CodeType, offset: int, exc: BaseException) -> Any:
        info = self.tracer.known(code)
        if info is None:
            return None
        frame = sys._getframe(1)
        if self.tracer._watched:
            self.tracer.end_watch(frame)
        self._previous[id(frame)] = NO_STATEMENT  # the running statement did not complete
        self.tracer._on_exception(frame, info, (type(exc), exc, exc.__traceback__))
        return None

    def _on_unwind(self, code: CodeType, offset: int, exc: BaseException) -> Any:
        if self.tracer.known(code) is not None:
            self._previous.pop(id(sys._getframe(1)), None)
        return None
