"""Distributed runs: every rank traced under PyTorch's own launcher (torchrun), merged."""

from __future__ import annotations

import glob
import json
import os
import re
import signal
import subprocess
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from shapelens.runner.launcher import (
    RunRequest,
    RunResult,
    UsageError,
    checked_target,
    child_config,
    resolve_python,
)
from shapelens.runner.protocol import FrameReader
from shapelens.runner.trace_builder import TraceBuilder
from shapelens.trace import Trace
from shapelens.trace.merge import merge_traces

_RANK = str(Path(__file__).with_name("rank.py"))
TRACE_DIR_VARIABLE = "SHAPELENS_TRACE_DIR"


def run_distributed(
    request: RunRequest, nproc_per_node: int, torchrun_args: tuple[str, ...] = ()
) -> RunResult:
    """``torchrun --nproc-per-node N`` with every rank traced; the ranks' traces merged."""
    python = resolve_python(request.python)
    cwd, target = checked_target(request)
    directory = os.environ.get(TRACE_DIR_VARIABLE) or tempfile.mkdtemp(prefix="shapelens-ranks-")
    os.makedirs(directory, exist_ok=True)
    for stale in glob.glob(os.path.join(directory, "rank-*")):
        os.unlink(stale)
    config = child_config(request, cwd, target)
    command = [
        python, "-m", "torch.distributed.run", "--standalone",
        f"--nproc-per-node={nproc_per_node}", *torchrun_args,
        _RANK, directory, json.dumps(config),
    ]  # fmt: skip
    started = time.monotonic()
    process = subprocess.Popen(command, cwd=cwd, env=request.env, start_new_session=True)
    try:
        returncode = process.wait(timeout=request.timeout_s)
        timed_out = False
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        returncode = process.wait()
        timed_out = True
    except KeyboardInterrupt:
        os.killpg(process.pid, signal.SIGINT)
        returncode = process.wait()
        timed_out = False
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
