"""SHAPELENS_FORK_SERVER: ``shapelens run`` forks its run from a running fork server (what a
script or test suite that runs ShapeLens many times sets), with the terminal's stdin and
Ctrl-C passed on; a server for another interpreter or another start-up is never used."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from shapelens.runner.warm import FORK_SERVER_VARIABLE

from conftest import alive, run_cli, warm_runner

ASK = """
import json
import os
import torch
print("parent", os.getppid(), flush=True)
name = input("name? ")
x = torch.ones(len(name), 2)
"""


LOOP = """
import time
import torch
print("started", flush=True)
while True:
    time.sleep(0.01)
"""


def _parent(stdout: str) -> int:
    return int(next(line for line in stdout.splitlines() if line.startswith("parent")).split()[1])


def test_a_run_forks_from_the_server_with_the_terminal_stdin(script, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    script(ASK)
    with warm_runner(dict(os.environ)) as warm:
        env = {FORK_SERVER_VARIABLE: warm.directory}
        forked = run_cli("main.py", cwd=tmp_path, stdin="alice\n", env=env, cold=True)
        assert forked.returncode == 0, forked.stderr
        assert _parent(forked.stdout) == warm.server_pid
        assert forked.trace is not None and forked.trace["status"] == "ok"
        # the shape of what the forked run read from the piped stdin
        assert forked.var(tmp_path / "main.py", 6, "x")["shape"] == [5, 2]
        # another start-up variable: not the interpreter a cold start would give, so cold
        other = run_cli(
            "main.py", cwd=tmp_path, stdin="bob\n", env={**env, "PYTHONHASHSEED": "7"}, cold=True
        )
        assert other.returncode == 0, other.stderr
        assert _parent(other.stdout) != warm.server_pid


@pytest.mark.parametrize("server_ignores_it", [False, True])
def test_ctrl_c_reaches_a_forked_run(script, tmp_path: Path, server_ignores_it: bool) -> None:  # type: ignore[no-untyped-def]
    """Also when the fork server started with SIGINT ignored (by a shell's background job,
    which a fork would keep): the run gets it as a run started cold does."""
    script(LOOP)
    with contextlib.ExitStack() as stack:
        previous = signal.getsignal(signal.SIGINT)
        if server_ignores_it:
            signal.signal(signal.SIGINT, signal.SIG_IGN)  # the fork server inherits it
        try:
            warm = stack.enter_context(warm_runner(dict(os.environ)))
        finally:
            signal.signal(signal.SIGINT, previous)
        process = subprocess.Popen(
            [sys.executable, "-m", "shapelens", "run", "--json", "trace.json", "main.py"],
            cwd=tmp_path,
            env={**os.environ, FORK_SERVER_VARIABLE: warm.directory},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        assert process.stdout is not None
        deadline = time.monotonic() + 60
        while "started" not in process.stdout.readline():
            assert time.monotonic() < deadline and process.poll() is None
        os.killpg(process.pid, signal.SIGINT)  # what Ctrl-C in a terminal does
        try:
            process.communicate(timeout=60)
        finally:
            process.kill()
    trace = json.loads((tmp_path / "trace.json").read_text())
    assert trace["exception"]["type"] == "KeyboardInterrupt"


STARTER = """
import sys
import time
from shapelens.runner.warm import WarmRunner
runner = WarmRunner(sys.executable)
while not runner.ready:
    time.sleep(0.05)  # polling for the condition
print(runner.directory, runner.server_pid, flush=True)
time.sleep(600)
"""


def _wait_gone(directory: str, server: int) -> None:
    """The fork server ``server`` exits and its folder goes, within 30 s."""
    deadline = time.monotonic() + 30
    while os.path.exists(directory) or alive(server):
        assert time.monotonic() < deadline, os.listdir(directory)
        time.sleep(0.05)  # polling for the condition


def test_a_fork_server_whose_starter_is_killed_exits_and_removes_its_folder() -> None:
    """A language server killed outright (SIGKILL: nothing of it runs) leaves neither its
    fork server running nor the fork server's folder (its socket, its description) in /tmp."""
    starter = subprocess.Popen([sys.executable, "-c", STARTER], stdout=subprocess.PIPE, text=True)
    try:
        assert starter.stdout is not None
        directory, server = starter.stdout.readline().split()
        assert os.path.exists(os.path.join(directory, "zygote.sock"))
    finally:
        starter.kill()
        starter.wait()
    _wait_gone(directory, int(server))


def test_a_fork_server_ended_by_sigterm_removes_its_folder() -> None:
    """The editor ending its language server's process group (SIGTERM to each process): the
    fork server exits and takes its folder with it."""
    with warm_runner(dict(os.environ)) as warm:
        assert warm.server_pid is not None
        os.kill(warm.server_pid, signal.SIGTERM)
        _wait_gone(warm.directory, warm.server_pid)


TERMINATED = """
import os
import signal
print("before", flush=True)
os.kill(os.getpid(), signal.SIGTERM)
print("after")
"""


def test_a_run_that_gets_sigterm_ends_as_one_started_cold(script, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The fork server handles SIGTERM itself; a run forked from it gets the disposition the
    server started with (here the default: the program ends by the signal), as cold."""
    script(TERMINATED)
    forked, cold = (
        run_cli("--quiet", "main.py", cwd=tmp_path, cold=cold) for cold in (False, True)
    )
    assert (forked.returncode, forked.stdout) == (cold.returncode, cold.stdout)
    assert forked.stdout == "before\n" and forked.returncode != 0
