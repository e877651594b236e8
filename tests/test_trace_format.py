"""The trace file follows its JSON Schema and round-trips through the data model."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

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
        raise ValueError("end")
        """
    )
    run = run_cli("--quiet", "main.py", cwd=tmp_path)
    assert run.trace is not None
    jsonschema.validate(run.trace, SCHEMA)
    assert run.trace["schema"] == "shapelens.trace/1"
    assert run.trace["python"].count(".") == 2
    assert run.trace["duration_s"] > 0
    loaded = load_trace(tmp_path / ".trace.json")
    assert trace_to_json(loaded) == run.trace
    assert loaded.findings[0].kind == "broadcast"
    assert loaded.exception is not None and loaded.exception.type == "ValueError"


def test_rejects_other_files(tmp_path: Path) -> None:
    with pytest.raises(TraceFormatError, match=r"not a shapelens\.trace/1 trace"):
        trace_from_json({"schema": "something/2"})
    with pytest.raises(TraceFormatError, match="malformed"):
        trace_from_json({"schema": "shapelens.trace/1", "argv": []})
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(TraceFormatError, match="not JSON"):
        load_trace(bad)
