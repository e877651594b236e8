"""The trace file follows its JSON Schema and round-trips through the data model."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from shapelens.present.findings import finding_detail, finding_message, related_locations
from shapelens.trace import load_trace, trace_from_json, trace_to_json
from shapelens.trace.codec import SCHEMA_PATH, TraceFormatError

from conftest import run_cli

SCHEMA = json.loads(SCHEMA_PATH.read_text())


def test_traces_validate_and_round_trip(script, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    script(
        """
        import numpy as np
        a = np.ones(4); b = np.ones((4, 1))
        pair = (a - b, {"k": a})
        best = float("inf")
        for t in (3, 1, 2):
            x = np.zeros((2, t))
        raise ValueError("end")
        """
    )
    run = run_cli("--quiet", "main.py", cwd=tmp_path)
    assert run.trace is not None
    jsonschema.validate(run.trace, SCHEMA)
    assert run.trace["schema"] == "shapelens.trace/2"
    assert run.trace["python"].count(".") == 2
    assert run.trace["duration_s"] > 0
    loaded = load_trace(tmp_path / ".trace.json")
    assert trace_to_json(loaded) == run.trace
    [broadcast] = loaded.findings
    assert (broadcast.kind, broadcast.expression, broadcast.operator) == ("broadcast", "a - b", "-")
    assert [(o.name, o.shape) for o in broadcast.operands] == [("a", (4,)), ("b", (4, 1))]
    assert broadcast.result_shape == (4, 4)
    assert loaded.exception is not None and loaded.exception.type == "ValueError"
    [best] = [v for line in loaded.lines for v in line.vars if v.name == "best"]
    assert best.number == (float("inf"), float("inf"), float("inf"))
    [x] = [v for line in loaded.lines for v in line.vars if v.name == "x"]
    assert x.dim_ranges == ((2, 2), (1, 3))


def test_rejects_other_files(tmp_path: Path) -> None:
    with pytest.raises(TraceFormatError, match=r"not a shapelens\.trace/2 trace"):
        trace_from_json({"schema": "something/2"})
    with pytest.raises(TraceFormatError, match="malformed"):
        trace_from_json({"schema": "shapelens.trace/2", "argv": []})
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(TraceFormatError, match="not JSON"):
        load_trace(bad)


def test_version_1_files_are_migrated() -> None:
    """A trace written by an older ShapeLens (findings as sentences) still opens and reads
    the same; writing it again gives a valid /2 file."""
    message = "broadcast: `y` (4,) - `pred` (4, 1) → (4, 4); the result is larger"
    related = {"file": "/p/a.py", "line": 3, "message": "`y` created here: (4,) float32 cpu"}
    old = {
        "schema": "shapelens.trace/1",
        "argv": ["/p/a.py"],
        "python": "3.11.7",
        "duration_s": 0.5,
        "status": "ok",
        "exit_code": 0,
        "detail": None,
        "exception": None,
        "lines": [],
        "findings": [
            {
                "kind": "broadcast",
                "severity": "warning",
                "file": "/p/a.py",
                "line": 5,
                "message": message,
                "related": [related],
            }
        ],
    }
    trace = trace_from_json(old)
    [finding] = trace.findings
    assert finding_message(finding) == message
    assert finding_detail(finding) == message.removeprefix("broadcast: ")
    assert [(r.line, r.message) for r in related_locations(finding)] == [(3, related["message"])]
    again = trace_to_json(trace)
    jsonschema.validate(again, SCHEMA)
    assert finding_message(trace_from_json(again).findings[0]) == message
