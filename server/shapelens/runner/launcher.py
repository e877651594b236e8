"""Parent side of a traced run: spawn the child, pump its channel, enforce limits."""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from shapelens.runner._bootstrap import MINIMUM, TOO_OLD_EXIT
from shapelens.runner.contract import ChildConfig, RunRequest
from shapelens.runner.protocol import FrameReader
from shapelens.runner.warm import WarmProcess, WarmRunner
from shapelens.trace import Trace
from shapelens.trace.builder import TraceBuilder

_BOOTSTRAP = str(Path(__file__).with_name("_bootstrap.py"))
RUNNER_PACKAGE = str(Path(__file__).resolve().parents[1])
"""Where the runner's own frames live: debuggers are told to hide them."""
STOP_GRACE_S = 0.5


class UsageError(Exception):
    """A run that cannot start (missing file or interpreter): one clear line for the user."""


@dataclass(frozen=True, kw_only=True)
class RunResult:
    trace: Trace
    error: str | None = None
    """Set when the target could not be started (syntax error, missing file)."""


OutputCallback = Callable[[str, str], None]
SnapshotCallback = Callable[[Trace], None]
DebugCallback = Callable[[str, int], None]
SNAPSHOT_INTERVAL_S = 1.0


def run_traced(
    request: RunRequest,
    *,
    on_output: OutputCallback | None = None,
    on_snapshot: SnapshotCallback | None = None,
    on_debug: DebugCallback | None = None,
    cancel: threading.Event | None = None,
    warm: WarmRunner | None = None,
) -> RunResult:
    """Run ``request`` in a child process and return its trace. Never raises for user code.

    ``on_snapshot`` receives the results so far (status ``running``) at most once a second
    while new ones arrive, so an editor can show hints of a long run as it goes (also while
    a debugger holds it at a breakpoint). ``on_debug`` receives debugpy's host and port.
    ``warm``: fork the child from this fork server when it is ready (same interpreter).
    """
    python = resolve_python(request.python)
    cwd, target = checked_target(request)
    channel_read, channel_write = os.pipe()
    control_read, control_write = os.pipe()
    crash_read, crash_write = os.pipe()
    config = ChildConfig.for_request(request, cwd, target).with_fds(
        channel=channel_write, control=control_read, crash=crash_write
    )
    argv = [request.target if request.module else target, *request.args]
    builder = TraceBuilder(argv=argv, on_debug=on_debug)
    env = dict(os.environ if request.env is None else request.env)
    if request.capture_output:
        env.setdefault("PYTHONUNBUFFERED", "1")  # the editor shows output as it comes
    if request.options.tracing.debug:
        env.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")  # frozen-modules warning noise
    pipe = subprocess.PIPE if request.capture_output else None
    started = time.monotonic()
    process: subprocess.Popen[bytes] | WarmProcess | None = None
    if warm is not None and warm.suits(python, env):
        process = warm.spawn(config, env=env, cwd=cwd, capture_output=request.capture_output)
    try:
        process = process or subprocess.Popen(
            [python, _BOOTSTRAP, config.to_json()],
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL if config.stdin == "empty" else None,
            stdout=pipe,
            stderr=pipe,
            pass_fds=config.fds,
            start_new_session=request.capture_output,
        )
    except OSError as err:
        for fd in (
            channel_read,
            channel_write,
            control_read,
            control_write,
            crash_read,
            crash_write,
        ):
            os.close(fd)
        raise UsageError(f"cannot start the interpreter {python}: {err.strerror}") from err
    os.close(channel_write)
    os.close(control_read)
    os.close(crash_write)
    pumps = pump_output(process, on_output) if request.capture_output else []
    supervisor = _Supervisor(
        process, channel_read, control_write, builder, request.options.run.timeout_s, cancel
    )
    if on_snapshot is not None:
        supervisor.on_snapshot = lambda: on_snapshot(
            builder.build(duration_s=time.monotonic() - started, returncode=None, outcome="running")
        )
    outcome = supervisor.watch()
    for pump in pumps:
        pump.join()
    builder.crash_report(_read_available(crash_read), cwd)
    if not builder.python and builder.error is None and outcome is None:
        builder.error = not_started(python, process.returncode)
    duration = time.monotonic() - started
    trace = builder.build(duration_s=duration, returncode=process.returncode, outcome=outcome)
    return RunResult(trace=trace, error=builder.error)


def not_started(python: str, returncode: int | None) -> str:
    """Why the child ended before it said hello: ShapeLens never ran in it (an interpreter
    too old, a broken installation), so the run is an error, never an ``ok``."""
    if returncode == TOO_OLD_EXIT:
        needed = ".".join(map(str, MINIMUM))
        return (
            f"{python} is older than Python {needed}: ShapeLens runs programs on Python "
            f"{needed} or newer (choose another with --python, or the extension's "
            "shapelens.interpreter setting)"
        )
    if returncode is not None and returncode < 0:
        ended = f"was killed by signal {-returncode}"
    else:
        ended = f"exited with status {returncode}"
    return f"{python} {ended} before ShapeLens could start in it (its error output says why)"


def checked_target(request: RunRequest) -> tuple[str, str]:
    """The absolute working directory and target, or a clear :class:`UsageError`."""
    cwd = os.path.abspath(request.cwd)
    if not os.path.isdir(cwd):
        raise UsageError(f"working directory does not exist: {request.cwd}")
    target = request.target
    if not request.module:
        target = os.path.join(cwd, target)
        if not os.path.exists(target):
            raise UsageError(f"cannot run {request.target}: no such file")
    return cwd, target


def _read_available(fd: int) -> str:
    """What the child's faulthandler wrote, without waiting on grandchildren holding the pipe."""
    chunks = []
    try:
        while select.select([fd], [], [], 0)[0]:
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(fd)
    return b"".join(chunks).decode("utf-8", errors="replace")


def resolve_python(python: str) -> str:
    found = shutil.which(python) if os.sep not in python else python
    if found is None or not os.path.exists(found):
        raise UsageError(f"Python interpreter not found: {python}")
    return found


class _Supervisor:
    """Reads the channel until EOF while enforcing the timeout and cancellation."""

    def __init__(
        self,
        process: subprocess.Popen[bytes] | WarmProcess,
        channel: int,
        control: int,
        builder: TraceBuilder,
        timeout_s: float | None,
        cancel: threading.Event | None,
    ) -> None:
        self.process = process
        self.channel = channel
        self.control = control
        self.builder = builder
        self.deadline = None if timeout_s is None else time.monotonic() + timeout_s
        self.cancel = cancel
        self.reader = FrameReader()
        self.on_snapshot: Callable[[], None] | None = None
        self._last_snapshot = time.monotonic()

    def watch(self) -> str | None:
        """Returns "timeout"/"cancelled" when we stopped the run, else None."""
        stopped: str | None = None
        try:
            while True:
                wait = 0.1
                ready, _, _ = select.select([self.channel], [], [], wait)
                if ready and not self._read():
                    break
                self._maybe_snapshot()
                if stopped is None:
                    if self.cancel is not None and self.cancel.is_set():
                        stopped = "cancelled"
                    elif self.deadline is not None and time.monotonic() >= self.deadline:
                        stopped = "timeout"
                    if stopped is not None:
                        self._stop()
                        break
        finally:
            os.close(self.channel)
            with contextlib.suppress(OSError):
                os.close(self.control)
        self.process.wait()
        return stopped

    def _maybe_snapshot(self) -> None:
        now = time.monotonic()
        if self.on_snapshot is None or now - self._last_snapshot < SNAPSHOT_INTERVAL_S:
            return
        if self.builder.take_changed():
            self._last_snapshot = now
            self.on_snapshot()

    def _read(self) -> bool:
        try:
            data = os.read(self.channel, 1 << 16)
        except OSError:
            return False
        if not data:
            return False
        for message in self.reader.feed(data):
            self.builder.accept(message)
        return True

    def _stop(self) -> None:
        """Ask the child for a last flush, give it a moment, then kill it."""
        with contextlib.suppress(OSError):
            os.write(self.control, b"stop\n")
        deadline = time.monotonic() + STOP_GRACE_S
        while not self.builder.stopped and time.monotonic() < deadline:
            ready, _, _ = select.select([self.channel], [], [], 0.05)
            if ready and not self._read():
                break
        _kill_tree(self.process)
        while True:  # drain whatever was written before the kill
            ready, _, _ = select.select([self.channel], [], [], 0.2)
            if not ready or not self._read():
                break


def _kill_tree(process: subprocess.Popen[bytes] | WarmProcess) -> None:
    try:
        if process.pid == os.getpgid(process.pid):
            os.killpg(process.pid, signal.SIGKILL)
        else:
            process.kill()
    except (ProcessLookupError, PermissionError):
        pass


def pump_output(
    process: subprocess.Popen[bytes] | WarmProcess, on_output: OutputCallback | None
) -> list[threading.Thread]:
    """Drain stdout and stderr concurrently (a full pipe would block the child)."""
    threads = []
    for stream_name, stream in (("stdout", process.stdout), ("stderr", process.stderr)):
        if stream is None:
            continue
        thread = threading.Thread(target=_pump, args=(stream, stream_name, on_output), daemon=True)
        thread.start()
        threads.append(thread)
    return threads


def _pump(stream: IO[bytes], name: str, on_output: OutputCallback | None) -> None:
    with stream:
        for chunk in iter(lambda: stream.read1(1 << 16), b""):  # type: ignore[attr-defined]
            if on_output is not None:
                on_output(name, chunk.decode("utf-8", errors="replace"))
