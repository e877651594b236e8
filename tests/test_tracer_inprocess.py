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

from shapelens.engine.backends.settrace import Tracer
from shapelens.engine.recording.run_records import RunRecords
from shapelens.engine.recording.scope import ScopeConfig
from shapelens.engine.session import engine_for

pytestmark = pytest.mark.backend

HERE = os.path.dirname(os.path.abspath(__file__))


def make_tracer(function: str = "traced_function") -> tuple[Tracer, RunRecords]:
    engine = engine_for(ScopeConfig(root=HERE, functions=(function,)), backend="settrace")
    assert isinstance(engine.backend, Tracer)
    return engine.backend, engine.records


def traced_function(n: int) -> Any:
    total = np.zeros(3)
    for _ in range(n):
        step = np.ones(3)
        total = total + step
    return total


def stats_of(records: RunRecords, name: str) -> Any:
    return next(s for s in records.all_stats if s.name == name)


@pytest.fixture(autouse=True)
def no_tracer_leaks() -> Any:
    assert sys.gettrace() is None
    yield
    assert sys.gettrace() is None
    assert threading.gettrace() is None


def test_restores_settrace_and_threading_trace() -> None:
    tracer, records = make_tracer()
    with tracer:
        assert sys.gettrace() is not None  # (on 3.11 the gate: off in the frames this calls)
        assert threading.gettrace() is not None
        traced_function(3)
    assert sys.gettrace() is None and sys.getprofile() is None
    assert stats_of(records, "step").hits == 3
    assert stats_of(records, "total").shape == (3,)


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
        tracer, records = make_tracer()
        with tracer:
            traced_function(2)
        assert sys.gettrace() is theirs  # given back, not dropped
    finally:
        sys.settrace(None)
    first = traced_function.__code__.co_firstlineno
    # Both tracers saw every line: theirs (like debugpy's breakpoints) and ours.
    assert seen.count(first + 3) == 2
    assert stats_of(records, "step").hits == 2


def test_threads_started_by_user_code_are_traced() -> None:
    tracer, records = make_tracer()
    with tracer:
        worker = threading.Thread(target=traced_function, args=(4,))
        worker.start()
        worker.join()
    assert stats_of(records, "step").hits == 4


class ReadWhileFlushed:
    """An array whose shape, read last, is read while the child's flusher thread drains the
    records: a thread switch there is rare but possible at any bytecode (a CI run lost a
    loss's shape to one)."""

    dtype = np.dtype("float32")

    def __init__(self, records: RunRecords, sent: list[Any]) -> None:
        self.records = records
        self.sent = sent

    @property
    def shape(self) -> tuple[int, ...]:
        self.sent.extend(self.records.drain())
        return (2, 3)


def read_once(records: RunRecords, sent: list[Any]) -> None:
    value = ReadWhileFlushed(records, sent)
    del value


def test_a_flush_in_the_middle_of_a_read_never_sends_it_half_read_for_good() -> None:
    tracer, records = make_tracer("read_once")
    sent: list[Any] = []
    with tracer:
        read_once(records, sent)
    sent.extend(records.drain())  # the run's last flush
    latest = {(e.file, e.line, e.name): e for m in sent if m["t"] == "vars" for e in m["entries"]}
    (entry,) = (e for (_, _, name), e in latest.items() if name == "value")
    assert entry.shape == [2, 3] and entry.dtype == "float32" and entry.hits == 1
