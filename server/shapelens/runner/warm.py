"""Server side of the warm runner: starts the fork server once per interpreter and spawns
runs through it. Falls back to a cold start whenever it is not ready or not healthy."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import IO

from shapelens.runner.contract import ChildConfig

_ZYGOTE = str(Path(__file__).with_name("zygote.py"))
FORK_SERVER_VARIABLE = "SHAPELENS_FORK_SERVER"
"""Names the folder of a running fork server that ``shapelens run`` forks its runs from
(``WarmRunner.attach``), for scripts and test suites that run ShapeLens many times."""
_DESCRIPTION = "server.json"  # beside the socket: the interpreter and its start-up variables


def _startup_env(env: dict[str, str]) -> dict[str, str]:
    """The variables that shape an interpreter's start (PYTHONPATH, ...): a fork server
    started with others is not the interpreter a cold start would give."""
    return {k: v for k, v in env.items() if k.startswith("PYTHON") and k != "PYTHONUNBUFFERED"}


def forkable(config: ChildConfig) -> bool:
    """Whether the fork server can start this child: a debugged run starts cold."""
    return not config.options.tracing.debug


class WarmProcess:
    """A run forked by the fork server, with the part of ``Popen``'s interface we use."""

    def __init__(self, connection: socket.socket, pid: int, stdout: IO[bytes] | None,
                 stderr: IO[bytes] | None) -> None:  # fmt: skip
        self._connection = connection
        self._reader = connection.makefile("rb")
        self.pid = pid
        self.stdout = stdout
        self.stderr = stderr
        self.returncode: int | None = None

    def wait(self) -> int:
        if self.returncode is None:
            line = self._reader.readline()
            try:
                self.returncode = int(json.loads(line)["exit"])
            except (ValueError, KeyError, TypeError):
                self.returncode = -9  # the fork server died with the run
            self._reader.close()
            self._connection.close()
        return self.returncode

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, 9)


class WarmRunner:
    """One fork server for one interpreter; ``spawn`` returns ``None`` until it is ready."""

    def __init__(self, python: str, env: dict[str, str] | None = None) -> None:
        self.python = python
        self.env = dict(os.environ if env is None else env)
        self.directory = tempfile.mkdtemp(prefix="shapelens-warm-")  # 0700: ours alone
        self.socket_path = os.path.join(self.directory, "zygote.sock")
        self._ready = threading.Event()
        self._spawned: list[int] = []
        self._interrupt_pending = False
        description = {"python": python, "startup_env": _startup_env(self.env)}
        Path(self.directory, _DESCRIPTION).write_text(json.dumps(description))
        self._process: subprocess.Popen[bytes] | None = subprocess.Popen(
            [python, _ZYGOTE, self.socket_path],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=self.env,
        )
        threading.Thread(target=self._wait_ready, daemon=True).start()

    @classmethod
    def attach(cls, directory: str) -> WarmRunner | None:
        """The fork server another process started in ``directory`` (it owns it: closing
        this one leaves it running), or ``None`` when there is none ready there."""
        try:
            description = json.loads(Path(directory, _DESCRIPTION).read_text())
            python, startup_env = str(description["python"]), dict(description["startup_env"])
        except (OSError, ValueError, KeyError, TypeError):
            return None
        runner = cls.__new__(cls)
        runner.python = python
        runner.env = startup_env
        runner.directory = directory
        runner.socket_path = os.path.join(directory, "zygote.sock")
        runner._ready = threading.Event()
        runner._process = None
        runner._spawned = []
        runner._interrupt_pending = False
        if os.path.exists(runner.socket_path):
            runner._ready.set()
        return runner

    def _wait_ready(self) -> None:
        assert self._process is not None and self._process.stdout is not None
        if self._process.stdout.readline().strip() == b"ready":
            self._ready.set()

    @property
    def server_pid(self) -> int | None:
        """The fork server's process id, when this runner started it."""
        return None if self._process is None else self._process.pid

    @property
    def ready(self) -> bool:
        return self._ready.is_set() and (self._process is None or self._process.poll() is None)

    def suits(self, python: str, env: dict[str, str]) -> bool:
        """Same interpreter, and no start-up variable (PYTHONPATH, ...) that differs."""
        return python == self.python and _startup_env(env) == _startup_env(self.env)

    def spawn(
        self, config: ChildConfig, *, env: dict[str, str], cwd: str, capture_output: bool
    ) -> WarmProcess | None:
        """Fork a child that runs ``config`` in ``cwd`` with ``env``, or ``None`` (start it
        cold) when the fork server is not ready or cannot give the child what it asks for.

        The child gets ``config``'s descriptors (passed over the socket: their numbers in it
        are the fork server's own); stdout and stderr are new pipes when capturing, else the
        caller's own."""
        if not self.ready or not forkable(config):
            return None
        request = {"config": config.to_dict(), "env": env, "cwd": cwd}
        stdin = 0 if config.stdin == "inherit" else os.open(os.devnull, os.O_RDONLY)
        if capture_output:
            out_read, out_write = os.pipe()
            err_read, err_write = os.pipe()
        else:
            out_read = err_read = -1
            out_write, err_write = 1, 2
        connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            connection.connect(self.socket_path)
            socket.send_fds(
                connection,
                [json.dumps(request).encode()],
                [stdin, out_write, err_write, *config.fds],
            )
            reply = json.loads(connection.makefile("rb").readline())
        except (OSError, ValueError):
            connection.close()
            for fd in (out_read, err_read):
                if fd >= 0:
                    os.close(fd)
            return None
        finally:
            if stdin != 0:
                os.close(stdin)
            if capture_output:
                os.close(out_write)
                os.close(err_write)
        self._spawned.append(int(reply["pid"]))
        if self._interrupt_pending:  # Ctrl-C came while the fork server answered
            self.interrupt()
        return WarmProcess(
            connection,
            int(reply["pid"]),
            os.fdopen(out_read, "rb") if capture_output else None,
            os.fdopen(err_read, "rb") if capture_output else None,
        )

    def interrupt(self) -> None:
        """Ctrl-C for the runs this runner forked (each leads a process group of its own).
        One that comes while the fork server is still answering (the run may print before
        its pid is known here) reaches the run as soon as it is."""
        self._interrupt_pending = not self._spawned
        for pid in self._spawned:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGINT)

    def close(self) -> None:
        if self._process is None:
            return  # attached: the server is its starter's to close
        if self._process.poll() is None:
            self._process.kill()
            self._process.wait()
        for stream in (self._process.stdin, self._process.stdout):
            if stream is not None:
                stream.close()
        with contextlib.suppress(OSError):
            os.unlink(self.socket_path)
        with contextlib.suppress(OSError):
            os.unlink(os.path.join(self.directory, _DESCRIPTION))
        if os.path.isdir(self.directory):
            os.rmdir(self.directory)


def named_fork_server() -> WarmRunner | None:
    """The fork server named by SHAPELENS_FORK_SERVER (a script's or a test suite's): runs
    fork from it instead of starting an interpreter and importing torch, where it suits."""
    directory = os.environ.get(FORK_SERVER_VARIABLE)
    return WarmRunner.attach(directory) if directory else None
