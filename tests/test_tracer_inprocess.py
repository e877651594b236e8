"""The tracer in-process: it chains to a tracer already installed (debugpy, coverage) and
restores everything it replaced, also on error. Runs on 3.11 and on 3.12+ (numpy only)."""

from __future__ import annotations

import os
import sys
import threading
from types import FrameType
from typing import Any

import numpy as np
import pytest

from shapelens.engine.findings import FindingsConfig
from shapelens.engine.frame_events import FrameEvents
from shapelens.engine.recorder import Recorder
from shapelens.engine.scope import ScopeConfig, UserCodeScope
from shapelens.engine.tracer import Tracer

pytestmark = pytest.mark.backend

HERE = os.path.dirname(os.path.abspath(__file__))


def make_tracer(function: str = "traced_function") -> tuple[Tracer, Recorder]:
    recorder = Recorder()
    scope = UserCodeScope(ScopeConfig(root=HERE, functions=(function,)))
    events = FrameEvents(scope=scope, recorder=recorder, findings=FindingsConfig())
    return Tracer(events), recorder


def traced_function(n: int) -> Any:
    total = np.zeros(3)
    for _ in range(n):
        step = np.ones(3)
        total = total + step
    return total


def stats_of(recorder: Recorder, name: str) -> Any:
    return next(s for s in recorder.all_stats if s.name == name)


@pytest.fixture(autouse=True)
def no_tracer_leaks() -> Any:
    assert sys.gettrace() is None
    yield
    assert sys.gettrace() is None
    assert threading.gettrace() is None


def test_restores_settrace_and_threading_trace() -> None:
    tracer, recorder = make_tracer()
    with tracer:
        assert sys.gettrace() is not None  # (on 3.11 the gate: off in the frames this calls)
        assert threading.gettrace() is not None
        traced_function(3)
    assert sys.gettrace() is None and sys.getprofile() is None
    assert stats_of(recorder, "step").hits == 3
    assert stats_of(recorder, "total").shape == (3,)


def test_restores_on_error() -> None:
    tracer, _ = make_tracer()
    with pytest.raises(ZeroDivisionError), tracer:
        traced_function(1)
        _ = 1 / 0


def test_chains_to_an_existing_tracer() -> None:
    seen: list[int] = []

    def their_local(frame: FrameType, event: str, arg: Any) -> Any:
        if event == "line":
            seen.append(frame.f_lineno)
        return their_local

    def theirs(frame: FrameType, event: str, arg: Any) -> Any:
        return their_local if frame.f_code is traced_function.__code__ else None

    sys.settrace(theirs)
    try:
        tracer, recorder = make_tracer()
        with tracer:
            traced_function(2)
        assert sys.gettrace() is theirs  # given back, not dropped
    finally:
        sys.settrace(None)
    first = traced_function.__code__.co_firstlineno
    # Both tracers saw every line: theirs (like debugpy's breakpoints) and ours.
    assert seen.count(first + 3) == 2
    assert stats_of(recorder, "step").hits == 2


def test_threads_started_by_user_code_are_traced() -> None:
    tracer, recorder = make_tracer()
    with tracer:
        worker = threading.Thread(target=traced_function, args=(4,))
        worker.start()
        worker.join()
    assert stats_of(recorder, "step").hits == 4


class ReadWhileFlushed:
    """An array whose shape, read last, is read while the child's flusher thread drains the
    recorder: a thread switch there is rare but possible at any bytecode (a CI run lost a
    loss's shape to one)."""

    dtype = np.dtype("float32")

    def __init__(self, recorder: Recorder, sent: list[Any]) -> None:
        self.recorder = recorder
        self.sent = sent

    @property
    def shape(self) -> tuple[int, ...]:
        self.sent.extend(self.recorder.drain())
        return (2, 3)


def read_once(recorder: Recorder, sent: list[Any]) -> None:
    value = ReadWhileFlushed(recorder, sent)
    del value


def test_a_flush_in_the_middle_of_a_read_never_sends_it_half_read_for_good() -> None:
    tracer, recorder = make_tracer("read_once")
    sent: list[Any] = []
    with tracer:
        read_once(recorder, sent)
    sent.extend(recorder.drain())  # the run's last flush
    latest = {tuple(e[:3]): e for m in sent if m["t"] == "vars" for e in m["entries"]}
    (entry,) = (e for (_, _, name), e in latest.items() if name == "value")
    assert entry[4] == [2, 3] and entry[5] == "float32" and entry[8] == 1
