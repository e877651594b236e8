"""Server side of the warm runner: starts the fork server once per interpreter and spawns
runs through it. Falls back to a cold start whenever it is not ready or not healthy."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import IO

from shapelens.runner.contract import ChildConfig

_ZYGOTE = str(Path(__file__).with_name("zygote.py"))


def forkable(config: ChildConfig) -> bool:
    """Whether the fork server can start this child: it gives every child /dev/null as
    stdin (it cannot pass on the caller's), and a debugged run starts cold."""
    return config.stdin == "empty" and not config.debug


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
        self._directory = tempfile.mkdtemp(prefix="shapelens-warm-")  # 0700: ours alone
        self.socket_path = os.path.join(self._directory, "zygote.sock")
        self._ready = threading.Event()
        self._process = subprocess.Popen(
            [python, _ZYGOTE, self.socket_path],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=self.env,
        )
        threading.Thread(target=self._wait_ready, daemon=True).start()

    def _wait_ready(self) -> None:
        assert self._process.stdout is not None
        if self._process.stdout.readline().strip() == b"ready":
            self._ready.set()

    @property
    def ready(self) -> bool:
        return self._ready.is_set() and self._process.poll() is None

    def suits(self, python: str, env: dict[str, str]) -> bool:
        """Same interpreter, and no start-up variable (PYTHONPATH, ...) that differs."""
        startup = {
            k for k in (*env, *self.env) if k.startswith("PYTHON") and k != "PYTHONUNBUFFERED"
        }
        return python == self.python and all(env.get(k) == self.env.get(k) for k in startup)

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
                [out_write, err_write, *config.fds],
            )
            reply = json.loads(connection.makefile("rb").readline())
        except (OSError, ValueError):
            connection.close()
            for fd in (out_read, err_read):
                if fd >= 0:
                    os.close(fd)
            return None
        finally:
            if capture_output:
                os.close(out_write)
                os.close(err_write)
        return WarmProcess(
            connection,
            int(reply["pid"]),
            os.fdopen(out_read, "rb") if capture_output else None,
            os.fdopen(err_read, "rb") if capture_output else None,
        )

    def close(self) -> None:
        if self._process.poll() is None:
            self._process.kill()
            self._process.wait()
        for stream in (self._process.stdin, self._process.stdout):
            if stream is not None:
                stream.close()
        with contextlib.suppress(OSError):
            os.unlink(self.socket_path)
        if os.path.isdir(self._directory):
            os.rmdir(self._directory)
