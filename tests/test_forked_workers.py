"""Forked children of user code (os.fork, DataLoader workers) run untraced, holding none of
ShapeLens's pipes; one that outlives the program cannot keep the run from ending."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import IN_CI, line_of, run_cli

pytestmark = pytest.mark.backend

HAS_TORCH = IN_CI or importlib.util.find_spec("torch") is not None
"""Without torch the DataLoader half is left out, except in CI, where torch is required."""
BACKENDS = ["auto", "settrace"] if sys.version_info >= (3, 12) else ["auto"]

# Each forked child reports, from inside, whether anything of ShapeLens is still on in it.
# The runner's descriptors are found from its frame on the stack (introspection for this
# test only) and recognised by inode, as the child may reuse their numbers.
PROBE = """
import json, os, sys

def runner_pipes():
    frame = sys._getframe()
    while not (frame.f_code.co_name == "_execute" and "self" in frame.f_locals):
        frame = frame.f_back
    config = frame.f_locals["self"].config
    fds = (config.channel_fd, config.control_fd, config.crash_fd)
    return {fd: os.fstat(fd).st_ino for fd in fds}

PIPES = runner_pipes()
OUT = sys.argv[1]

def report(name):
    tools = []
    if hasattr(sys, "monitoring"):
        tools = [sys.monitoring.get_tool(tool) for tool in range(6)]
    held = []
    for fd, inode in PIPES.items():
        try:
            if os.fstat(fd).st_ino == inode:
                held.append(fd)
        except OSError:
            pass
    modes = 0  # torch function modes on the stack: the op watch's, if it were left on
    if "torch" in sys.modules:
        from shapelens.engine.torch_support.torch_compat import function_mode_depth
        modes = function_mode_depth(sys.modules["torch"])
    state = {"settrace": sys.gettrace() is not None, "tools": tools, "held": held, "modes": modes}
    with open(os.path.join(OUT, name + ".json"), "w") as out:
        json.dump(state, out)

pid = os.fork()
if pid == 0:
    report("fork")
    os._exit(0)
os.waitpid(pid, 0)
after_fork = True

try:
    import torch
except ImportError:
    torch = None
if torch is not None:
    from torch.utils.data import DataLoader, Dataset

    class Probe(Dataset):
        def __len__(self):
            return 4

        def __getitem__(self, index):
            report(f"worker-{torch.utils.data.get_worker_info().id}")
            return torch.zeros(2)

    loader = DataLoader(Probe(), batch_size=2, num_workers=2, multiprocessing_context="fork")
    for batch in loader:
        seen = batch
"""


@pytest.mark.parametrize("backend", BACKENDS)
def test_forked_children_are_untraced_and_free(script, tmp_path: Path, backend: str) -> None:  # type: ignore[no-untyped-def]
    main = script(PROBE)
    reports = tmp_path / "reports"
    reports.mkdir()
    run = run_cli("--quiet", "--backend", backend, "main.py", str(reports), cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert run.trace is not None and run.trace["status"] == "ok"
    expected = {"fork", *(["worker-0", "worker-1"] if HAS_TORCH else [])}
    assert {p.stem for p in reports.iterdir()} == expected
    for path in reports.iterdir():
        state = json.loads(path.read_text())
        assert state["settrace"] is False, path.stem
        assert "shapelens" not in state["tools"], (path.stem, state["tools"])
        assert state["held"] == [], path.stem
        assert state["modes"] == 0, path.stem  # forked by the loop's watched first hit
    # The traced program itself goes on being traced after each fork.
    assert run.line(main, line_of(main, "after_fork ="))
    if HAS_TORCH:
        assert run.var(main, line_of(main, "for batch in loader"), "batch")["shape"] == [2, 2]


DAEMON = """
import os, sys, time
import numpy as np

before = np.zeros(3)
pid = os.fork()
if pid == 0:  # a daemon: off the terminal, outlives the program by a minute
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    time.sleep(60)
    os._exit(0)
with open(sys.argv[1], "w") as out:
    out.write(str(pid))
after = np.ones(2)
"""


def test_a_fork_outliving_the_program_does_not_hold_up_the_run(script, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    main = script(DAEMON)
    pid_file = tmp_path / "daemon.pid"
    try:  # the daemon lives 60 s: a run that waited for it would not end in time
        run = run_cli("--quiet", "main.py", str(pid_file), cwd=tmp_path, timeout=50)
    except subprocess.TimeoutExpired:
        pytest.fail("the run waited for the forked child (it holds the channel open)")
    finally:
        if pid_file.exists():
            with contextlib.suppress(ProcessLookupError, ValueError):
                os.kill(int(pid_file.read_text()), signal.SIGKILL)
    assert run.returncode == 0, run.stderr
    assert run.trace is not None and run.trace["status"] == "ok"
    assert run.var(main, line_of(main, "after ="), "after")["shape"] == [2]
