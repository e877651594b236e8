"""Debugging with debugpy while ShapeLens traces: breakpoints hit N of N, the trace is
complete, and the inline-value helper describes tensors in the paused frame. Runs on 3.11
(settrace chained to debugpy's) and 3.12+ (numpy only there)."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from dap_client import DapClient

from shapelens.debug.inline_values import EXPRESSION, parse

from conftest import line_of, need

pytestmark = pytest.mark.backend

debugpy = need("debugpy")

LOOP = """
import numpy as np
batch = {"x": np.zeros((4, 3)), "n": 2}
total = np.zeros(3)
for step in range(5):
    row = np.full(3, float(step))
    total = total + row
print("done")
"""


def start_debug_run(tmp_path: Path, source: str) -> tuple[subprocess.Popen[str], DapClient, Path]:
    script = tmp_path / "main.py"
    script.write_text(source.lstrip("\n"))
    trace = tmp_path / "trace.json"
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "shapelens",
            "run",
            "--quiet",
            "--debug",
            "--json",
            str(trace),
            "main.py",
        ],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # the run, its child and debugpy's adapter: one group
    )
    assert process.stderr is not None
    # A run that dies before its announcement can leave debugpy's adapter holding stderr
    # open: the group is killed after a while, so the read below always ends.
    watchdog = threading.Timer(120, end_debug_run, [process])
    watchdog.start()
    seen = []
    found = None
    try:
        for line in process.stderr:  # the announcement, not a sleep
            seen.append(line)
            found = re.search(r"listening on (127\.0\.0\.1):(\d+)", line)
            if found:
                break
    finally:
        watchdog.cancel()
    if found is None:
        end_debug_run(process)
    assert found, seen
    return process, DapClient(found[1], int(found[2])), script


def end_debug_run(process: subprocess.Popen[str]) -> None:
    """Kill what is left of the run's process group (an adapter that outlived its program)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)


def attach(client: DapClient, script: Path, lines: list[int]) -> list[dict[str, Any]]:
    client.request("initialize", {"adapterID": "debugpy", "clientID": "shapelens-tests",
                                  "linesStartAt1": True, "columnsStartAt1": True,
                                  "pathFormat": "path"})  # fmt: skip
    attach_seq = client.send_request("attach", {"justMyCode": True})
    client.event("initialized")
    body = client.request(
        "setBreakpoints",
        {"source": {"path": str(script)}, "breakpoints": [{"line": n} for n in lines]},
    )
    client.request("configurationDone")
    client.response(attach_seq)
    return list(body["breakpoints"])


def test_breakpoints_hit_every_time_and_the_trace_is_complete(tmp_path: Path) -> None:
    process, client, script = start_debug_run(tmp_path, LOOP)
    row_line = line_of(script, "total = total + row")
    try:
        [breakpoint] = attach(client, script, [row_line])
        assert breakpoint["verified"]
        stops = 0
        inline: dict[str, str] = {}
        while True:
            event = client.event("stopped", "terminated", "exited")
            if event["event"] != "stopped":
                break
            stops += 1
            thread = event["body"]["threadId"]
            frames = client.request("stackTrace", {"threadId": thread})["stackFrames"]
            assert frames[0]["line"] == row_line
            result = client.request(
                "evaluate",
                {"expression": EXPRESSION, "frameId": frames[0]["id"], "context": "watch"},
            )
            inline = parse(result["result"])
            client.request("continue", {"threadId": thread})
        assert stops == 5  # 5 of 5: the tracer did not displace debugpy's
        assert inline == {
            "batch['x']": "(4,3) f64 cpu",
            "total": "(3,) f64 cpu",
            "row": "(3,) f64 cpu",
        }
    finally:
        client.close()
        try:
            out, _ = process.communicate(timeout=60)
        finally:
            end_debug_run(process)
    assert process.returncode == 0
    assert "done" in out
    import json

    trace = json.loads((tmp_path / "trace.json").read_text())
    row = next(
        v
        for entry in trace["lines"]
        if entry["line"] == line_of(script, "row =")
        for v in entry["vars"]
    )
    assert row["hits"] == 5 and row["shape"] == [3]


def test_inline_helper_on_tensors_meta_and_containers() -> None:
    torch = need("torch")

    def paused_frame() -> str:
        pred = torch.zeros(4, 1, requires_grad=True)  # noqa: F841
        huge = torch.empty(10**6, 10**6, device="meta")  # noqa: F841
        batch = {"image": torch.zeros(2, 3, dtype=torch.float16), "id": 3}  # noqa: F841
        pair = (torch.ones(2, dtype=torch.int64), "label")  # noqa: F841
        count = 3  # noqa: F841
        return str(eval(EXPRESSION))

    assert parse(repr(paused_frame())) == {
        "pred": "(4,1) f32 cpu grad",
        "huge": "(1000000,1000000) f32 meta",
        "batch['image']": "(2,3) f16 cpu",
        "pair[0]": "(2,) i64 cpu",
    }


TENSORS = """
import dataclasses
import numpy as np
import torch

@dataclasses.dataclass
class Batch:
    x: torch.Tensor
    y: torch.Tensor

x = torch.zeros(5, 3, requires_grad=True)
array = np.zeros((4, 3))
batch = {"image": torch.zeros(2, 3, dtype=torch.float16), "label": torch.ones(2, dtype=torch.int64)}
held = Batch(torch.zeros(8, 2), torch.zeros(8))
model = torch.nn.Linear(3, 1)
print("paused here")
"""


def _variables(client: DapClient, reference: int) -> dict[str, dict[str, Any]]:
    found = client.request("variables", {"variablesReference": reference})["variables"]
    return {v["name"]: v for v in found}


def test_variables_watch_and_hover_show_tensors_by_shape(tmp_path: Path) -> None:
    need("torch")
    process, client, script = start_debug_run(tmp_path, TENSORS)
    try:
        attach(client, script, [line_of(script, "print(")])
        event = client.event("stopped")
        thread = event["body"]["threadId"]
        frame = client.request("stackTrace", {"threadId": thread})["stackFrames"][0]
        [scope, *_] = client.request("scopes", {"frameId": frame["id"]})["scopes"]
        assert scope["name"] == "Locals"
        local = _variables(client, scope["variablesReference"])
        assert local["x"]["value"] == "Tensor (5,3) f32 cpu grad"
        assert local["array"]["value"] == "ndarray (4,3) f64 cpu"
        assert local["batch"]["value"] == "dict {'image': (2,3) f16 cpu, 'label': (2,) i64 cpu}"
        assert local["held"]["value"] == "Batch(x=(8,2) f32 cpu, y=(8,) f32 cpu)"
        assert local["model"]["value"] == (
            "Linear · 4 params · weight (1,3) f32 cpu grad, bias (1,) f32 cpu grad"
        )
        for name in ("x", "array", "batch", "held", "model"):
            assert "tensor(" not in local[name]["value"] and "array(" not in local[name]["value"]

        # Expanded: metadata first; values only when "values" is expanded.
        expanded = _variables(client, local["x"]["variablesReference"])
        assert list(expanded)[:8] == ["shape", "dtype", "device", "requires_grad", "grad_fn",
                                      "stride", "is_contiguous", "nbytes"]  # fmt: skip
        assert expanded["shape"]["value"] == "(5, 3)"
        assert expanded["stride"]["value"] == "(3, 1)"
        assert expanded["nbytes"]["value"] == "60"
        assert expanded["shape"]["evaluateName"] == "x.shape"
        values = expanded["values"]
        assert values["value"] == "expand to read all values"
        preview = _variables(client, values["variablesReference"])
        assert [preview[f"[{i}]"]["value"] for i in range(15)] == ["0.0"] * 15
        entries = _variables(client, local["batch"]["variablesReference"])
        assert entries["'image'"]["value"] == "Tensor (2,3) f16 cpu"

        # Hover and Watch evaluate the same way.
        for context in ("hover", "watch", "repl"):
            result = client.request(
                "evaluate", {"expression": "x", "frameId": frame["id"], "context": context}
            )
            assert result["result"] == "Tensor (5,3) f32 cpu grad", context
        hover = client.request(
            "evaluate", {"expression": "model.weight", "frameId": frame["id"], "context": "hover"}
        )
        assert hover["result"] == "Parameter (1,3) f32 cpu grad"
        client.request("continue", {"threadId": thread})
        client.event("terminated", "exited")
    finally:
        client.close()
        try:
            process.communicate(timeout=60)
        finally:
            end_debug_run(process)
    assert process.returncode == 0
