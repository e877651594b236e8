"""Distributed runs: every rank traced under PyTorch's own launcher (torchrun), merged."""

from __future__ import annotations

import glob
import json
import os
import re
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import replace
from pathlib import Path

from shapelens.runner.launcher import (
    OutputCallback,
    RunRequest,
    RunResult,
    UsageError,
    checked_target,
    child_config,
    pump_output,
    resolve_python,
)
from shapelens.runner.protocol import FrameReader
from shapelens.runner.trace_builder import TraceBuilder
from shapelens.trace import Trace
from shapelens.trace.merge import merge_traces

_RANK = str(Path(__file__).with_name("rank.py"))
TRACE_DIR_VARIABLE = "SHAPELENS_TRACE_DIR"


def run_distributed(
    request: RunRequest,
    nproc_per_node: int,
    torchrun_args: tuple[str, ...] = (),
    *,
    on_output: OutputCallback | None = None,
    cancel: threading.Event | None = None,
) -> RunResult:
    """``torchrun --nproc-per-node N`` with every rank traced; the ranks' traces merged.

    With ``request.capture_output`` the output goes to ``on_output`` (the language server's
    stdout is its protocol channel); ``cancel`` stops every rank."""
    python = resolve_python(request.python)
    cwd, target = checked_target(request)
    directory = os.environ.get(TRACE_DIR_VARIABLE) or tempfile.mkdtemp(prefix="shapelens-ranks-")
    os.makedirs(directory, exist_ok=True)
    for stale in glob.glob(os.path.join(directory, "rank-*")):
        os.unlink(stale)
    config = child_config(request, cwd, target)
    # One node unless the user set up a rendezvous for several (multi-node jobs).
    multi_node = any(a.startswith(("--nnodes", "--rdzv", "--master")) for a in torchrun_args)
    command = [
        python, "-m", "torch.distributed.run", *([] if multi_node else ["--standalone"]),
        f"--nproc-per-node={nproc_per_node}", *torchrun_args,
        _RANK, directory, json.dumps(config),
    ]  # fmt: skip
    started = time.monotonic()
    pipe = subprocess.PIPE if request.capture_output else None
    process = subprocess.Popen(
        command, cwd=cwd, env=request.env, start_new_session=True, stdout=pipe, stderr=pipe
    )
    pumps = pump_output(process, on_output) if request.capture_output else []
    deadline = None if request.timeout_s is None else started + request.timeout_s
    stopped = False
    try:
        while process.poll() is None:
            if (cancel is not None and cancel.is_set()) or (
                deadline is not None and time.monotonic() >= deadline
            ):
                os.killpg(process.pid, signal.SIGKILL)
                stopped = True
                break
            time.sleep(0.1)  # torchrun gives no event to wait on: poll cancel and deadline
    except KeyboardInterrupt:
        os.killpg(process.pid, signal.SIGINT)
    returncode = process.wait()
    for pump in pumps:
        pump.join()
    timed_out = stopped
    ranks, ended = read_rank_traces(directory, cwd, duration_s=time.monotonic() - started)
    if not ranks:
        raise UsageError(f"no rank wrote a trace into {directory} (torchrun exited {returncode})")
    trace = merge_traces(ranks, exit_code=124 if timed_out else returncode, ended_at=ended)
    return RunResult(trace=replace(trace, argv=(target, *request.args)))


def read_rank_traces(
    directory: str, root: str, *, duration_s: float = 0.0
) -> tuple[dict[int, Trace], dict[int, float]]:
    """Each ``rank-N.frames`` in ``directory`` as a trace (what a crashed rank had sent too),
    and when each rank ended (wall clock), for those that did."""
    traces: dict[int, Trace] = {}
    ended: dict[int, float] = {}
    for path in sorted(glob.glob(os.path.join(directory, "rank-*.frames"))):
        found = re.search(r"rank-(\d+)\.frames$", path)
        if found is None:
            continue
        rank = int(found[1])
        builder = TraceBuilder(argv=[])
        reader = FrameReader()
        with open(path, "rb") as frames:
            for message in reader.feed(frames.read()):
                builder.accept(message)
        crash = Path(path).with_suffix(".crash")
        if crash.exists():
            builder.crash_report(crash.read_text(errors="replace"), root)
        traces[rank] = builder.build(duration_s=duration_s, returncode=None, outcome=None)
        if builder.end is not None and "ended_at" in builder.end:
            ended[rank] = float(builder.end["ended_at"])
    return traces, ended
