"""Feeds what snoop() traces into ShapeLens's structured recorder, when ``SHAPELENS_TRACE``
names a file: run on a remote box, copy the trace, open the file, see the hints."""

from __future__ import annotations

import atexit
import os
import sys
import threading
import time
from types import FrameType
from typing import Any

from shapelens.engine.backends.settrace import TraceFunction, Tracer
from shapelens.engine.recording.scope import ScopeConfig
from shapelens.engine.session import engine_for
from shapelens.trace import write_trace
from shapelens.trace.builder import TraceBuilder

ENV_VARIABLE = "SHAPELENS_TRACE"


WRITE_INTERVAL_S = 1.0


class SnoopRecording:
    """One per process: every snooper feeds the same recorder. The file is rewritten when a
    snooped frame returns (at most once a second) and at interpreter exit."""

    def __init__(self, path: str) -> None:
        self.path = path
        # Snooped code is user code by definition: the scope's filters are not consulted.
        # pysnooper's sys.settrace function picks the frames and hands us their events: the
        # settrace backend's local tracers follow them (the engine is never started itself).
        self.engine = engine_for(ScopeConfig(root=os.getcwd()), backend="settrace")
        tracer = self.engine.backend
        assert isinstance(tracer, Tracer)  # what choose_backend("settrace") builds
        self.tracer = tracer
        self._locals: dict[int, TraceFunction] = {}
        self._started = time.monotonic()
        self._builder = TraceBuilder(argv=list(sys.argv))
        self._builder.python = ".".join(map(str, sys.version_info[:3]))
        self._lock = threading.Lock()
        self._last_write = 0.0
        atexit.register(self.write)

    def event(self, frame: FrameType, event: str, arg: Any) -> None:
        key = id(frame)
        local = self._locals.get(key)
        if local is None:
            local = self.tracer.local_tracer(frame, record_arguments=event == "call")
            if local is None:
                return
            self._locals[key] = local
        local(frame, event, arg)
        if event == "return":
            self._locals.pop(key, None)
            if time.monotonic() - self._last_write >= WRITE_INTERVAL_S:
                self.write()

    def write(self) -> None:
        with self._lock:
            self._last_write = time.monotonic()
            for message in self.engine.drain():
                self._builder.accept(message)
            trace = self._builder.build(
                duration_s=time.monotonic() - self._started, returncode=0, outcome=None
            )
            try:
                write_trace(trace, self.path)
            except OSError as err:
                print(f"shapelens: cannot write {self.path}: {err.strerror}", file=sys.stderr)


_recording: SnoopRecording | None = None


def recording() -> SnoopRecording | None:
    """The process's recording when ``SHAPELENS_TRACE`` is set, else ``None``."""
    global _recording
    path = os.environ.get(ENV_VARIABLE)
    if not path:
        return None
    if _recording is None or _recording.path != path:
        _recording = SnoopRecording(path)
    return _recording
