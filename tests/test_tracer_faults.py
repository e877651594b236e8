"""An error of ShapeLens's own inside a tracing callback never reaches the program: tracing
stops, the program runs on untraced as under plain ``python``, and the run says where
tracing stopped and why (``tracing_stopped``). Planted here by making the recorder raise
on a frame's third return, as a race between threads once made it raise for real."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from shapelens.engine.recording.scope import ScopeConfig
from shapelens.engine.session import engine_for

from conftest import CHILD_PYTHON, line_of, run_cli

pytestmark = pytest.mark.backend  # each backend catches what its own callbacks raise

PROGRAM = """
def helper(x):
    return x * 2


def main():
    total = 0
    for i in range(6):
        total += helper(i)
    return total
"""

BACKENDS = ["settrace", *(["monitoring"] if hasattr(sys, "monitoring") else [])]


def planted(calls: int, real: Callable[..., Any]) -> Callable[..., Any]:
    """``real``, raising on its ``calls``-th call (once: it stays broken no longer)."""
    count = [0]

    def raising(*args: Any, **kwargs: Any) -> Any:
        count[0] += 1
        if count[0] == calls:
            raise RuntimeError("planted")
        return real(*args, **kwargs)

    return raising


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_error_in_a_callback_stops_tracing_and_the_program_runs_on(
    tmp_path: Path, backend: str
) -> None:
    path = tmp_path / "prog.py"
    path.write_text(PROGRAM)
    namespace: dict[str, Any] = {}
    exec(compile(PROGRAM, str(path), "exec"), namespace)
    built = engine_for(ScopeConfig(root=str(tmp_path)), backend=backend)
    recorder, records = built.recorder, built.records
    recorder.frame_returned = planted(3, recorder.frame_returned)  # type: ignore[method-assign]
    with built.backend:
        assert namespace["main"]() == 30  # no error reached it: every helper call ran
        hits_then = dict(records.line_hits[str(path)])
        assert namespace["main"]() == 30  # a second run, untraced: tracing stopped
    assert records.line_hits[str(path)] == hits_then
    loop_body = line_of(path, "total += helper(i)")
    assert hits_then[loop_body] == 3  # the third helper call's return raised
    assert records.fault is not None
    assert records.fault.startswith("RuntimeError: planted")
    assert records.fault.endswith(f"tracing prog.py:{line_of(path, 'return x * 2')}")
    sent = [m for m in records.drain(last=True) if m["t"] == "fault"]
    assert sent == [{"t": "fault", "message": records.fault}]


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_error_in_the_watch_of_a_library_return_stops_tracing(
    tmp_path: Path, backend: str
) -> None:
    """The return watch the module tree uses (``Module.__call__``'s, here a function of a
    library's): its callback raising stops tracing as a line's would."""
    user, library = tmp_path / "user", tmp_path / "library"
    user.mkdir()
    library.mkdir()
    (library / "lib.py").write_text("def forward(x):\n    return x + 1\n")
    path = user / "prog.py"
    path.write_text(PROGRAM.replace("helper(i)", "forward(i)") + "\nfrom lib import forward\n")
    namespace: dict[str, Any] = {}
    sys.path.insert(0, str(library))
    try:
        exec(compile(path.read_text(), str(path), "exec"), namespace)
    finally:
        sys.path.remove(str(library))
    built = engine_for(ScopeConfig(root=str(user)), backend=backend)
    returned: list[Any] = []
    watched = planted(2, lambda frame, value: returned.append(value))
    built.backend.watch_returns(namespace["forward"].__code__, watched, lambda: None)
    with built.backend:
        assert namespace["main"]() == 21  # every call ran
        assert namespace["main"]() == 21
    assert returned == [1]  # the second return raised; none is watched after it
    fault = built.records.fault
    assert fault is not None and fault.startswith("RuntimeError: planted"), fault


SITE = """
from shapelens.engine.recording.statement_recorder import StatementRecorder

_real = StatementRecorder.frame_returned
_calls = [0]


def _planted(self, *args, **kwargs):
    _calls[0] += 1
    if _calls[0] == 3:
        raise RuntimeError("planted in a test")
    return _real(self, *args, **kwargs)


StatementRecorder.frame_returned = _planted
"""

SCRIPT = """
import warnings


def helper(x):
    return x * 2


total = 0
for i in range(6):
    total += helper(i)
warnings.warn("the program's own")
print("total", total)
"""


def test_a_run_whose_tracing_stopped_says_so_and_the_program_is_as_under_python(
    tmp_path: Path,
) -> None:
    """Through ``shapelens run``: stdout, stderr and exit status as under ``python``, and
    the trace and listing say where tracing stopped."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SITE)  # the child imports it as it starts
    script = tmp_path / "main.py"
    script.write_text(textwrap.dedent(SCRIPT))
    plain = subprocess.run(
        [CHILD_PYTHON or sys.executable, "main.py"],
        cwd=tmp_path, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    run = run_cli("main.py", cwd=tmp_path, cold=True, env={"PYTHONPATH": str(site)})
    assert (run.returncode, run.stdout) == (plain.returncode, plain.stdout) == (0, "total 30\n")
    assert plain.stderr in run.stderr  # the program's warning, then the listing
    assert run.trace is not None
    stopped = run.trace["tracing_stopped"]
    assert stopped.startswith("RuntimeError: planted in a test")
    assert stopped.endswith(f"tracing main.py:{line_of(script, 'return x * 2')}")
    assert "shapelens: tracing stopped early, the program ran on untraced from there" in (
        run.stderr
    )
    hits = {line["line"]: line["hits"] for line in run.trace["lines"]}
    assert hits[line_of(script, "total += helper(i)")] == 3
    assert line_of(script, "print(") not in hits  # untraced from the fault on
