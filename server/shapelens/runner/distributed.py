"""Distributed runs: every rank traced under PyTorch's own launcher (torchrun), merged.

Each rank streams into ``shapelens-<RUN>-node<N>-rank<R>.frames`` (and ``.crash``) in the
trace directory: RUN names the run and is shared by the nodes of a job, N is torchrun's node
rank, R the global rank. Only files named so are read or removed, so the directory may be
shared between nodes and runs and hold the user's own files.

torchrun starts every worker in its own session and passes no file descriptors, so a rank's
control channel is a FIFO in this launcher's private directory: "stop" asks for a last flush,
and EOF (we closed it, or died) makes the rank kill itself, so no rank outlives its launcher.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from shapelens.runner.contract import ChildConfig, RunRequest
from shapelens.runner.launcher import (
    OutputCallback,
    RunResult,
    UsageError,
    checked_target,
    pump_output,
    resolve_python,
)
from shapelens.runner.protocol import FrameReader
from shapelens.trace import Trace
from shapelens.trace.builder import TIMEOUT_EXIT_CODE, TraceBuilder
from shapelens.trace.merge import merge_traces
from shapelens.trace.rank_facts import RankFacts

_RANK = str(Path(__file__).with_name("rank.py"))
TRACE_DIR_VARIABLE = "SHAPELENS_TRACE_DIR"
RUN_ID_VARIABLE = "SHAPELENS_RUN_ID"
_RANK_FILE = re.compile(r"^shapelens-(?P<run>.+)-node(?P<node>\d+)-rank(?P<rank>\d+)\.frames$")
STOP_WAIT_S = 10.0
"""After a stop, how long torchrun may take to notice its workers ended (its monitor interval
is 0.1 s since torch 2.3, 5 s before) before we kill it."""
STOP_ACK_WAIT_S = 5.0
"""How long a stop waits for every rank's last flush before it ends them all."""
COLLECTIVE_TIMEOUT_S = 60.0
"""Default of ``--collective-timeout``: a run whose every rank has waited this long in a
collective (or ended) is hung, and stopped (gloo's own timeout is 30 minutes)."""


@dataclass(frozen=True, kw_only=True)
class RankFile:
    run: str
    node: int
    rank: int
    path: str
    modified: float


def run_distributed(
    request: RunRequest,
    nproc_per_node: int,
    torchrun_args: tuple[str, ...] = (),
    *,
    collective_timeout_s: float | None = COLLECTIVE_TIMEOUT_S,
    on_output: OutputCallback | None = None,
    cancel: threading.Event | None = None,
    interrupt: threading.Event | None = None,
) -> RunResult:
    """``torchrun --nproc-per-node N`` with every rank traced; the ranks' traces merged.

    When every local rank has waited ``collective_timeout_s`` in a collective (or ended),
    the run is hung: it is stopped as the time limit stops it, and the merge says where
    each rank waited.

    With ``request.capture_output`` the output goes to ``on_output`` (the language server's
    stdout is its protocol channel); ``cancel`` stops every rank (status ``timeout``, as
    the run's time limit does). ``interrupt`` is set by the caller's SIGINT handler (only
    the main thread gets signals, and torchrun runs in its own session): the first Ctrl-C
    goes to torchrun, which hands it to every rank (a ``KeyboardInterrupt`` at the user's
    line, as in a single-process run); a second one stops the ranks at once."""
    python = resolve_python(request.python)
    cwd, target = checked_target(request)
    env = os.environ if request.env is None else request.env
    # One node unless the user set up a rendezvous for several (multi-node jobs).
    multi_node = any(a.startswith(("--nnodes", "--rdzv", "--master")) for a in torchrun_args)
    run_id, shared = _run_id(env, torchrun_args, multi_node)
    private = tempfile.mkdtemp(prefix="shapelens-run-")  # 0700: control FIFOs, default traces
    try:
        directory = env.get(TRACE_DIR_VARIABLE) or private
        os.makedirs(directory, exist_ok=True)
        if not multi_node:  # a reused id: its old files are ours (no other node writes now)
            remove_run(directory, run_id)
        elif directory != private and not shared:
            note = (
                f"shapelens: this node's ranks are saved as run {run_id} in {directory}; give "
                f"every node the same {RUN_ID_VARIABLE} (or --rdzv-id) to merge them as one run\n"
            )
            _say(request, on_output, note)
        config = ChildConfig.for_request(request, cwd, target)  # each rank sets its fds
        command = [
            python, "-m", "torch.distributed.run", *([] if multi_node else ["--standalone"]),
            f"--nproc-per-node={nproc_per_node}", *torchrun_args,
            _RANK, directory, run_id, private, config.to_json(),
        ]  # fmt: skip
        return _launch(
            request, command, cwd, target, directory, run_id, private, nproc_per_node,
            collective_timeout_s=collective_timeout_s, on_output=on_output, cancel=cancel,
            interrupt=interrupt,
        )  # fmt: skip
    finally:
        shutil.rmtree(private, ignore_errors=True)


def _launch(
    request: RunRequest,
    command: list[str],
    cwd: str,
    target: str,
    directory: str,
    run_id: str,
    private: str,
    nproc_per_node: int,
    *,
    collective_timeout_s: float | None,
    on_output: OutputCallback | None,
    cancel: threading.Event | None,
    interrupt: threading.Event | None,
) -> RunResult:
    controls = []
    for local_rank in range(nproc_per_node):
        fifo = os.path.join(private, f"control-{local_rank}")
        os.mkfifo(fifo, 0o600)
        controls.append(os.open(fifo, os.O_RDWR | os.O_NONBLOCK))  # a writer that never blocks
    started = time.monotonic()
    process = _start_torchrun(request, command, cwd, controls)
    pumps = pump_output(process, on_output) if request.capture_output else []
    timeout = request.options.run.timeout_s
    deadline = None if timeout is None else started + timeout
    stopped: str | None = None  # "timeout", "cancelled" or "hang": we stopped the ranks
    interrupted = False
    try:
        while process.poll() is None:
            if interrupt is not None and interrupt.is_set():
                interrupt.clear()
                if interrupted:  # a second Ctrl-C: don't wait for the ranks to unwind
                    _stop(process, controls, private)
                    break
                interrupted = True
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGINT)
            stopped = _to_stop(cancel, deadline, private, nproc_per_node, collective_timeout_s)
            if stopped is not None:
                _stop(process, controls, private)
                break
            time.sleep(0.1)  # torchrun gives no event to wait on: poll cancel and deadline
    finally:
        for fd in controls:  # every rank is gone by now, or must go
            os.close(fd)
        controls.clear()
    returncode = process.wait()
    for pump in pumps:
        pump.join()
    duration = time.monotonic() - started
    ranks, ended, facts = read_rank_traces(directory, cwd, runs=(run_id,), duration_s=duration)
    if not ranks and stopped is not None:  # stopped before any rank started: an empty trace
        empty = TraceBuilder(argv=[target, *request.args])
        return RunResult(trace=empty.build(duration_s=duration, returncode=None, outcome=stopped))
    if not ranks:
        raise UsageError(f"no rank wrote a trace into {directory} (torchrun exited {returncode})")
    if stopped is not None:
        trace = merge_traces(
            ranks, exit_code=TIMEOUT_EXIT_CODE, ended_at=ended, facts=facts, stopped=True
        )
        reason = _stop_reason(stopped, collective_timeout_s)
        trace = replace(trace, status="timeout", detail=f"{reason} ({trace.detail})")
    else:
        # After Ctrl-C, torchrun's own status says nothing: the ranks' (130) is the run's.
        trace = merge_traces(
            ranks, exit_code=None if interrupted else returncode, ended_at=ended, facts=facts,
            stopped=interrupted,
        )  # fmt: skip
    return RunResult(trace=replace(trace, argv=(target, *request.args)))


def _start_torchrun(
    request: RunRequest, command: list[str], cwd: str, controls: list[int]
) -> subprocess.Popen[bytes]:
    """torchrun in its own session (its workers get a Ctrl-C through it)."""
    pipe = subprocess.PIPE if request.capture_output else None
    try:
        return subprocess.Popen(
            command,
            cwd=cwd,
            env=request.env,
            start_new_session=True,
            stdin=subprocess.DEVNULL if request.stdin == "empty" else None,
            stdout=pipe,
            stderr=pipe,
        )
    except OSError as err:
        for fd in controls:
            os.close(fd)
        raise UsageError(f"cannot start the interpreter {command[0]}: {err.strerror}") from err


def _to_stop(
    cancel: threading.Event | None,
    deadline: float | None,
    private: str,
    nproc_per_node: int,
    collective_timeout_s: float | None,
) -> str | None:
    """Whether to stop the ranks now, and why: ``cancelled``, ``timeout`` or ``hang``."""
    if cancel is not None and cancel.is_set():
        return "cancelled"
    if deadline is not None and time.monotonic() >= deadline:
        return "timeout"
    if collective_timeout_s is not None and _hung(private, nproc_per_node, collective_timeout_s):
        return "hang"
    return None


def _stop_reason(stopped: str, collective_timeout_s: float | None) -> str:
    """Why the launcher stopped the ranks, in words (the run's ``detail``)."""
    if stopped == "hang":
        return (
            f"stopped: every rank waited {collective_timeout_s:g} s in a collective or had "
            "ended (--collective-timeout)"
        )
    return "cancelled" if stopped == "cancelled" else "stopped by the time limit"


def _hung(private: str, nproc_per_node: int, timeout_s: float) -> bool:
    """Every local rank waits in a collective (the latest began ``timeout_s`` ago or more)
    or has ended, and one waits at least: no rank can come to meet the others."""
    waiting: list[float] = []
    ended = 0
    for local_rank in range(nproc_per_node):
        if os.path.exists(os.path.join(private, f"ended-{local_rank}")):
            ended += 1
            continue
        try:
            with open(os.path.join(private, f"waiting-{local_rank}")) as record:
                waiting.append(float(record.read()))
        except (OSError, ValueError):
            return False  # running (or between two calls)
    return bool(waiting) and time.time() - max(waiting) >= timeout_s


def _stop(process: subprocess.Popen[bytes], controls: list[int], private: str) -> None:
    """Every local rank sends its last results and ends; then torchrun ends."""
    for name in os.listdir(private):
        if name.startswith("control-"):  # a worker torchrun restarts finds none: it ends
            os.unlink(os.path.join(private, name))
    for fd in controls:
        with contextlib.suppress(OSError):
            os.write(fd, b"stop\n")  # flush, acknowledge; the EOF that follows ends the rank
    # Every rank flushes before any ends: torchrun SIGTERMs the others when one ends.
    acks = [os.path.join(private, f"stopped-{local_rank}") for local_rank in range(len(controls))]
    deadline = time.monotonic() + STOP_ACK_WAIT_S
    while not all(map(os.path.exists, acks)) and process.poll() is None:
        if time.monotonic() >= deadline:  # a rank that ended already never acknowledges
            break
        time.sleep(0.02)  # a file is the only ack a rank torchrun started can give us
    for fd in controls:
        os.close(fd)
    controls.clear()
    try:
        process.wait(STOP_WAIT_S)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)


def _run_id(
    env: Mapping[str, str], torchrun_args: tuple[str, ...], multi_node: bool
) -> tuple[str, bool]:
    """The run's id, and whether it was given (shared by the nodes of a job) or made here."""
    given = env.get(RUN_ID_VARIABLE)
    if not given and multi_node:  # the rendezvous id is the same on every node of the job
        given = _option(torchrun_args, ("--rdzv-id", "--rdzv_id")) or env.get("PET_RDZV_ID")
    if given:
        return re.sub(r"[^A-Za-z0-9_.-]", "_", given), True
    return time.strftime("%Y%m%dT%H%M%S") + "-" + secrets.token_hex(3), False


def _option(args: tuple[str, ...], names: tuple[str, ...]) -> str | None:
    for index, arg in enumerate(args):
        name, equals, value = arg.partition("=")
        if name in names:
            return value if equals else (args[index + 1] if index + 1 < len(args) else None)
    return None


def _say(request: RunRequest, on_output: OutputCallback | None, text: str) -> None:
    if not request.capture_output:
        sys.stderr.write(text)
    elif on_output is not None:
        on_output("stderr", text)


def rank_files(directory: str) -> list[RankFile]:
    """The rank files ShapeLens wrote in ``directory`` (of every run), by run, node, rank."""
    found = []
    with contextlib.suppress(OSError):
        for entry in os.scandir(directory):
            match = _RANK_FILE.match(entry.name)
            if match is None or not entry.is_file():
                continue
            found.append(
                RankFile(
                    run=match["run"],
                    node=int(match["node"]),
                    rank=int(match["rank"]),
                    path=entry.path,
                    modified=entry.stat().st_mtime,
                )
            )
    return sorted(found, key=lambda f: (f.run, f.node, f.rank))


def runs_newest_first(files: Collection[RankFile]) -> list[str]:
    latest: dict[str, float] = {}
    for file in files:
        latest[file.run] = max(latest.get(file.run, 0.0), file.modified)
    return sorted(latest, key=lambda run: latest[run], reverse=True)


def remove_run(directory: str, run_id: str) -> None:
    """Delete one run's rank files (only files ShapeLens wrote: never the user's)."""
    for file in rank_files(directory):
        if file.run == run_id:
            stem = Path(file.path)
            for path in (file.path, stem.with_suffix(".crash"), stem.with_suffix(".exit")):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)


def read_rank_traces(
    directory: str, root: str, *, runs: Collection[str], duration_s: float = 0.0
) -> tuple[dict[int, Trace], dict[int, float], dict[int, RankFacts]]:
    """Each rank file of ``runs`` in ``directory`` as a trace (what a crashed rank had sent
    too), when each rank ended (wall clock), for those that did, and what else each left
    (its collectives, its last position, how its process ended)."""
    traces: dict[int, Trace] = {}
    ended: dict[int, float] = {}
    facts: dict[int, RankFacts] = {}
    where: dict[int, str] = {}
    for file in rank_files(directory):
        if file.run not in runs:
            continue
        if file.rank in traces:
            raise UsageError(
                f"rank {file.rank} is in two files: {os.path.basename(where[file.rank])} and "
                f"{os.path.basename(file.path)}"
            )
        where[file.rank] = file.path
        builder = TraceBuilder(argv=[])
        reader = FrameReader()
        with open(file.path, "rb") as frames:
            for message in reader.feed(frames.read()):
                builder.accept(message)
        crash = Path(file.path).with_suffix(".crash")
        if crash.exists():
            builder.crash_report(crash.read_text(errors="replace"), root)
        traces[file.rank] = builder.build(duration_s=duration_s, returncode=None, outcome=None)
        if builder.end is not None and "ended_at" in builder.end:
            ended[file.rank] = float(builder.end["ended_at"])
        facts[file.rank] = builder.rank_facts(_ending(Path(file.path).with_suffix(".exit")))
    return traces, ended, facts


def _ending(path: Path) -> str | None:
    """The warden's word on how the rank's process ended (None: it had not, or no warden)."""
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    return text or None
