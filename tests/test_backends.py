"""Both tracing backends give the same trace; sys.monitoring sampling and coexistence.
(sys.monitoring exists on Python 3.12+: `make test` runs these under 3.12.1 and 3.13.0.)"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import SAMPLES, line_of, normalised_trace, run_cli

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
    assert _same_hits(estimated, exact) == exact


def _same_hits(estimated: Any, exact: Any) -> Any:
    """``estimated`` with each "≈N" replaced by the exact count it estimates, when close."""
    if isinstance(estimated, str) and estimated.startswith("≈") and isinstance(exact, int):
        return exact if abs(int(estimated[1:]) - exact) <= max(1, exact * 0.02) else estimated
    if (
        isinstance(estimated, (list, tuple))
        and isinstance(exact, (list, tuple))
        and len(estimated) == len(exact)
    ):
        return type(estimated)(_same_hits(a, b) for a, b in zip(estimated, exact, strict=True))
    if isinstance(estimated, dict) and isinstance(exact, dict):
        return {k: _same_hits(v, exact.get(k)) for k, v in estimated.items()}
    return estimated


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

    from shapelens.engine.findings import FindingsConfig
    from shapelens.engine.frame_events import FrameEvents
    from shapelens.engine.monitoring import MonitoringTracer
    from shapelens.engine.recorder import Recorder
    from shapelens.engine.scope import ScopeConfig, UserCodeScope

    def hot(n: int) -> None:
        for _ in range(n):
            value = np.ones(2)  # noqa: F841

    recorder = Recorder()
    scope = UserCodeScope(ScopeConfig(root=str(Path(__file__).parent), functions=("hot",)))
    events = FrameEvents(scope=scope, recorder=recorder, findings=FindingsConfig())
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
    [stats] = [s for s in recorder.all_stats if s.name == "value"]
    assert stats.hits <= 6  # re-disabled at once after the restart, not counted 40 times
    assert recorder.sampled
    assert monitoring.get_tool(4) is None  # given back
