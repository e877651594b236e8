"""However the program ends, the trace is written with the right status and exit code."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import line_of, run_cli

pytestmark = pytest.mark.backend

PRELUDE = """
import numpy as np
before = np.zeros((3, 2))
"""


@pytest.mark.parametrize(
    ("ending", "status", "code"),
    [
        ("pass", "ok", 0),
        ("raise SystemExit(3)", "exit", 3),
        ("import sys; sys.exit('bye')", "exit", 1),
        ("import os; os._exit(5)", "exit", 5),
        ("raise KeyboardInterrupt", "exception", 130),
        ("raise ValueError('boom')", "exception", 1),
        # A program that ran a while (past a background flush), then died natively.
        ("import time, ctypes; time.sleep(1); ctypes.string_at(0)", "crashed", 139),
        (
            "import time, os, signal; time.sleep(1); os.kill(os.getpid(), signal.SIGKILL)",
            "crashed",
            137,
        ),
    ],
)
def test_endings(script, tmp_path: Path, ending: str, status: str, code: int) -> None:  # type: ignore[no-untyped-def]
    main = script(PRELUDE + ending + "\n")
    run = run_cli("main.py", cwd=tmp_path)
    assert run.returncode == code
    assert run.trace is not None, run.stderr
    assert (run.trace["status"], run.trace["exit_code"]) == (status, code)
    # What ran before the ending is in the trace, even after a segfault or SIGKILL.
    assert run.var(main, line_of(main, "before ="), "before")["shape"] == [3, 2]
    if status == "crashed":
        assert "killed by SIG" in run.trace["detail"]
        assert "crashed (killed by SIG" in run.stderr
    if code == 139:  # the segfault is located at the user's line
        assert run.trace["exception"]["message"] == "Segmentation fault"
        assert run.trace["exception"]["line"] == line_of(main, "import time, ctypes")
    if ending.startswith("raise ValueError"):
        assert run.trace["exception"] == {
            "type": "ValueError",
            "message": "boom",
            "file": str(main),
            "line": line_of(main, "raise ValueError"),
        }


def test_timeout_stops_an_infinite_loop_and_keeps_the_trace(script, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    main = script(
        """
        import numpy as np
        step = 0
        while True:
            grad = np.full((2, 2), step, dtype=np.float32)
            step += 1
        """
    )
    run = run_cli("--timeout", "1.5", "main.py", cwd=tmp_path)  # the loop never ends by itself
    assert run.trace is not None
    assert run.trace["status"] == "timeout" and run.returncode == 124
    grad = run.var(main, line_of(main, "grad ="), "grad")
    assert grad["shape"] == [2, 2] and grad["hits"] > 100


def test_exception_line_is_innermost_user_line(script, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    helper = script(
        """
        import json
        def parse(text):
            return json.loads(text)
        """,
        "helper.py",
    )
    script("import helper\nhelper.parse('{')\n")
    run = run_cli("main.py", cwd=tmp_path)
    assert run.trace is not None
    assert run.trace["exception"]["type"] == "JSONDecodeError"
    assert run.trace["exception"]["file"] == str(helper)
    assert run.trace["exception"]["line"] == line_of(helper, "return json.loads")


def test_huge_output_and_threads_do_not_disturb_the_channel(script, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    main = script(
        """
        import sys, threading
        import numpy as np
        sys.stdout.write("x" * 5_000_000)
        def worker(n):
            w = np.zeros((n, 2))
            return w
        threads = [threading.Thread(target=worker, args=(n,)) for n in (1, 2, 3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        """
    )
    run = run_cli("--quiet", "main.py", cwd=tmp_path)
    assert len(run.stdout) == 5_000_000
    w = run.var(main, line_of(main, "w = np.zeros"), "w")
    assert w["hits"] == 3 and sorted(w["shapes"]) == [[1, 2], [2, 2], [3, 2]]


def test_forked_children_do_not_write_into_the_channel(script, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    main = script(
        """
        import os
        import numpy as np
        before = np.zeros(2)
        pid = os.fork()
        if pid == 0:
            in_child = np.ones(3)
            os._exit(9)
        os.waitpid(pid, 0)
        after = np.ones(4)
        """
    )
    run = run_cli("--quiet", "main.py", cwd=tmp_path)
    assert run.trace is not None
    assert (run.trace["status"], run.trace["exit_code"]) == ("ok", 0)
    assert run.var(main, line_of(main, "after ="), "after")["shape"] == [4]
    assert run.line(main, line_of(main, "in_child =")) is None
