"""Both tracing backends give the same trace; sys.monitoring sampling and coexistence; the
one choice of backend that every wiring (runner child, notebook, snoop) makes.
(sys.monitoring exists on Python 3.12+: `make test` runs these under 3.12.1 and 3.13.0.)"""

from __future__ import annotations

import atexit
import shutil
import sys
from pathlib import Path

import pytest

from shapelens.engine.backends.choice import (
    GATE_VARIABLE,
    BackendChoice,
    BackendUnavailable,
    TracingBackend,
    choose_backend,
)
from shapelens.engine.backends.library_gate import hooked
from shapelens.engine.backends.monitoring import MonitoringTracer
from shapelens.engine.backends.settrace import Tracer
from shapelens.engine.recording.scope import ScopeConfig
from shapelens.engine.session import engine_for
from shapelens.notebook.session import KernelSession
from shapelens.snooping.recording import SnoopRecording

from conftest import SAMPLES, line_of, normalised_trace, run_cli, same_hits

pytestmark = pytest.mark.backend

needs_monitoring = pytest.mark.skipif(
    sys.version_info < (3, 12), reason="sys.monitoring needs Python 3.12+"
)


@needs_monitoring
@pytest.mark.parametrize("sample", sorted(p.name for p in SAMPLES.glob("*.py")))
def test_same_trace_from_both_backends(sample: str, tmp_path: Path) -> None:
    shutil.copy(SAMPLES / sample, tmp_path / sample)
    settrace = run_cli("--quiet", "--backend", "settrace", sample, cwd=tmp_path)
    monitoring = run_cli("--quiet", "--backend", "monitoring", sample, cwd=tmp_path)
    assert settrace.trace is not None and monitoring.trace is not None
    assert settrace.trace["lines"], "the sample produced no trace"
    exact, estimated = normalised_trace(settrace.trace), normalised_trace(monitoring.trace)
    assert same_hits(estimated, exact) == exact


@needs_monitoring
def test_sampling_switches_hot_lines_off(tmp_path: Path) -> None:
    shutil.copy(SAMPLES / "containers_and_findings.py", tmp_path / "sample.py")
    run = run_cli("--quiet", "--backend", "monitoring", "--sample", "50", "sample.py", cwd=tmp_path)
    assert run.trace is not None
    script = tmp_path / "sample.py"
    acc_line = run.line(script, line_of(script, "acc = acc + delta"))
    assert acc_line is not None and acc_line["sampled"] is True and acc_line["hits"] == 50
    assert (
        "acc (4,) f64 cpu ×50+"
        in run_cli(
            "--backend",
            "monitoring",
            "--sample",
            "50",
            "--hints",
            "full",
            "sample.py",
            cwd=tmp_path,
        ).stderr
    )
    # lines below the limit are exact and not marked
    assert "sampled" not in run.line(script, line_of(script, "bad = y - col"))  # type: ignore[operator]


@needs_monitoring
def test_restart_events_and_busy_tool_ids() -> None:
    import numpy as np

    def hot(n: int) -> None:
        for _ in range(n):
            value = np.ones(2)  # noqa: F841

    built = engine_for(
        ScopeConfig(root=str(Path(__file__).parent), functions=("hot",)), backend="settrace"
    )
    records, events = built.records, built.recorder
    monitoring = sys.monitoring  # type: ignore[attr-defined]
    monitoring.use_tool_id(3, "someone else")  # tool 3 busy: we take the next one
    try:
        with MonitoringTracer(events, sample_hits=5) as backend:
            assert backend._tool == 4
            hot(20)
            monitoring.restart_events()  # another tool re-enables every disabled event
            hot(20)
    finally:
        monitoring.free_tool_id(3)
    [stats] = [s for s in records.all_stats if s.name == "value"]
    assert stats.hits <= 6  # re-disabled at once after the restart, not counted 40 times
    assert records.sampled
    assert monitoring.get_tool(4) is None  # given back


GATED = sys.implementation.name == "cpython" and sys.version_info[:2] == (3, 11)
"""The gate is built on CPython 3.11 (test_library_gate checks that it is)."""

MONITORING = BackendChoice("monitoring")


def _switch_gate(monkeypatch: pytest.MonkeyPatch, *, off: bool) -> None:
    if off:
        monkeypatch.setenv(GATE_VARIABLE, "0")
    else:
        monkeypatch.delenv(GATE_VARIABLE, raising=False)


@pytest.mark.parametrize("gate_off", [False, True], ids=["gate", "gate-off"])
@pytest.mark.parametrize("requested", ["auto", "settrace", "monitoring"])
def test_the_backend_chosen_in_each_situation(
    requested: str, gate_off: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """auto: sys.monitoring on 3.12+, else sys.settrace; settrace: through the gate where it
    is built unless SHAPELENS_LIBRARY_GATE=0; monitoring: an error before 3.12."""
    _switch_gate(monkeypatch, off=gate_off)
    settrace = BackendChoice("settrace", gated=GATED and not gate_off)
    if sys.version_info >= (3, 12):
        expected = {"auto": MONITORING, "settrace": settrace, "monitoring": MONITORING}
        assert choose_backend(requested) == expected[requested]
    elif requested == "monitoring":
        with pytest.raises(BackendUnavailable, match=r"^monitoring needs Python 3\.12\+"):
            choose_backend(requested)
    else:
        assert choose_backend(requested) == settrace


def test_an_unknown_backend_is_refused() -> None:
    with pytest.raises(BackendUnavailable, match="'fastest' is not one of auto, settrace"):
        choose_backend("fastest")


def _running(backend: TracingBackend) -> BackendChoice:
    """What a started backend is (the gate's hook is linked only while a gate is in)."""
    if isinstance(backend, MonitoringTracer):
        return MONITORING
    assert isinstance(backend, Tracer)
    return BackendChoice("settrace", gated=hooked())


@pytest.mark.parametrize("gate_off", [False, True], ids=["gate", "gate-off"])
@pytest.mark.parametrize("requested", ["auto", "settrace"])
def test_the_backend_built_is_the_one_chosen(
    requested: str, gate_off: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _switch_gate(monkeypatch, off=gate_off)
    backend = engine_for(ScopeConfig(root=str(tmp_path)), backend=requested).backend
    backend.start()
    try:
        running = _running(backend)
    finally:
        backend.stop()
    assert running == choose_backend(requested)
    assert not hooked()


@pytest.mark.parametrize("gate_off", [False, True], ids=["gate", "gate-off"])
def test_a_notebook_cell_runs_under_the_chosen_backend(
    gate_off: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _switch_gate(monkeypatch, off=gate_off)
    session = KernelSession(cwd=str(tmp_path), cell_files=["<cell-*"], trace_dir=str(tmp_path))
    session.begin()
    try:
        assert session._active is not None
        running = _running(session._active.engine.backend)
    finally:
        session.abandon()
    assert running == choose_backend("auto")


def test_snoop_follows_the_frames_pysnooper_hands_it_with_local_tracers(tmp_path: Path) -> None:
    """pysnooper's sys.settrace function picks the frames: the recording follows them with
    the settrace backend's local tracers, on every Python."""
    recording = SnoopRecording(str(tmp_path / "trace.json"))
    atexit.unregister(recording.write)  # nothing recorded: no file to write at exit
    assert isinstance(recording.tracer, Tracer)


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="sys.monitoring is there")
def test_a_run_asking_for_monitoring_before_3_12_says_why(tmp_path: Path) -> None:
    (tmp_path / "main.py").write_text("x = 1\n")
    run = run_cli("--backend", "monitoring", "main.py", cwd=tmp_path)
    assert run.returncode == 2
    assert "--backend monitoring needs Python 3.12+ (this is 3.11" in run.stderr
