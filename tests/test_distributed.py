"""Distributed and multi-process runs: torchrun ranks traced and merged, divergence found,
a failing rank reported, per-rank traces merged later, DataLoader workers harmless."""

from __future__ import annotations

import asyncio
import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import jsonschema
import pytest

from shapelens.trace.codec import SCHEMA_PATH

from conftest import alive, line_of, need, run_cli

torch = need("torch")

DDP = """
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank = dist.get_rank()
data = torch.randn(15, 3)
shard = data[rank * 8:(rank + 1) * 8]
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(3, 1))
out = model(shard)
if rank == 1 and FAIL:
    raise RuntimeError("rank 1 gives up")
loss = out.sum()
loss.backward()
dist.destroy_process_group()
"""


def test_uneven_shard_gives_a_divergence_finding(script, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    main = script("FAIL = False\n" + DDP)
    run = run_cli("--nproc-per-node", "2", "--timeout", "120", "main.py", cwd=tmp_path, timeout=180)
    assert run.returncode == 0, run.stderr
    assert run.trace is not None
    jsonschema.validate(run.trace, json.loads(SCHEMA_PATH.read_text()))
    shard_line = line_of(main, "shard =")
    shard = run.var(main, shard_line, "shard")
    assert [(r["rank"], r["shape"]) for r in shard["ranks"]] == [(0, [8, 3]), (1, [7, 3])]
    # one cause, one finding: `out` (8, 1) | (7, 1) follows from the shard, as its chain
    [divergence] = run.findings("rank_divergence")
    assert divergence["line"] == shard_line
    assert "(8,3) float32 cpu on rank 0" in divergence["message"]
    assert [(r["line"], r["message"]) for r in divergence["related"]] == [
        (
            line_of(main, "out ="),
            "`out` differs the same way: (8, 1) float32 cpu on rank 0,"
            " (7, 1) float32 cpu on rank 1",
        )
    ]
    data = run.var(main, line_of(main, "data ="), "data")
    assert [r["shape"] for r in data["ranks"]] == [[15, 3], [15, 3]]  # agreeing ranks: no finding
    assert "shard (8,3) r0 | (7,3) r1" in run.stderr
    # Each rank's module tree, the DDP wrapper shown as the Linear it wraps.
    modules = [
        (m["rank"], m["class"], m["path"], m["inputs"][0]["shape"]) for m in run.trace["modules"]
    ]
    assert modules == [(0, "Linear", "", [8, 3]), (1, "Linear", "", [7, 3])]


def test_a_failing_rank_is_reported_and_the_run_ends(script, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    main = script("FAIL = True\n" + DDP)
    run = run_cli("--nproc-per-node", "2", "--timeout", "120", "main.py", cwd=tmp_path, timeout=180)
    assert run.returncode != 0
    assert run.trace is not None and run.trace["status"] == "exception"
    exception = run.trace["exception"]
    assert exception["message"] == "[rank 1] rank 1 gives up"
    assert exception["line"] == line_of(main, "raise RuntimeError")


def test_traces_in_a_shared_directory_merge_later(script, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    main = script("FAIL = False\n" + DDP)
    shared = tmp_path / "traces"
    shared.mkdir()
    user_files = {"rank-0.pt": b"checkpoint", "rank-1.log": b"log", "rank-0.frames": b"mine"}
    for name, content in user_files.items():
        (shared / name).write_bytes(content)
    temp = tmp_path / "tmp"
    temp.mkdir()
    run = run_cli(
        "--nproc-per-node", "2", "--quiet", "main.py", cwd=tmp_path, timeout=180,
        env={"SHAPELENS_TRACE_DIR": str(shared), "TMPDIR": str(temp)},
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    # The user's files are untouched; ours are named by run, node and rank.
    assert {name: (shared / name).read_bytes() for name in user_files} == user_files
    ours = sorted(p.name for p in shared.glob("shapelens-*.frames"))
    run_id = ours[0].removeprefix("shapelens-").removesuffix("-node0-rank0.frames")
    assert ours == [
        f"shapelens-{run_id}-node0-rank0.frames",
        f"shapelens-{run_id}-node0-rank1.frames",
    ]
    # The launcher's private folder is gone (torchrun leaves its own torchelastic_* logs).
    assert [p.name for p in temp.iterdir() if p.name.startswith("shapelens")] == []
    merged = tmp_path / "merged.json"

    def merge(*options: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "shapelens", "merge", str(shared), "-o", str(merged), *options],
            capture_output=True, text=True, timeout=60, cwd=tmp_path,
        )  # fmt: skip

    done = merge()
    assert done.returncode == 0, done.stderr
    assert "merged 2 ranks" in done.stderr
    # A second (older) run in the folder: merge names both and asks which one.
    for name in ours:
        older = shared / name.replace(run_id, "older-run")
        older.write_bytes((shared / name).read_bytes())
        os.utime(older, (1_000_000_000, 1_000_000_000))
    merged.unlink()
    ambiguous = merge()
    assert ambiguous.returncode == 2 and not merged.exists()
    listed = [line.split()[0] for line in ambiguous.stderr.splitlines()[1:]]
    assert listed == [run_id, "older-run"], ambiguous.stderr  # newest first
    done = merge("--run", run_id)
    assert done.returncode == 0, done.stderr
    trace = json.loads(merged.read_text())
    shard = next(
        v
        for entry in trace["lines"]
        if entry["line"] == line_of(main, "shard =")
        for v in entry["vars"]
    )
    assert [r["shape"] for r in shard["ranks"]] == [[8, 3], [7, 3]]
    missing = subprocess.run(
        [sys.executable, "-m", "shapelens", "merge", str(tmp_path / "nowhere"), "-o", str(merged)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert missing.returncode == 2 and "no such directory" in missing.stderr
    unknown = merge("--run", "nope")
    assert unknown.returncode == 2 and "no run nope in" in unknown.stderr


def test_dataloader_workers_neither_hang_nor_write_into_the_channel(script, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    main = script(
        """
        import torch
        from torch.utils.data import DataLoader, TensorDataset

        def collate(items):
            stacked = torch.stack([x for (x,) in items])
            return stacked

        if __name__ == "__main__":
            dataset = TensorDataset(torch.arange(12.0).reshape(12, 1))
            loader = DataLoader(dataset, batch_size=4, num_workers=2, collate_fn=collate)
            for batch in loader:
                total = batch.sum()
        """
    )
    run = run_cli("--timeout", "120", "main.py", cwd=tmp_path, timeout=180)
    assert run.returncode == 0, run.stderr
    assert run.trace is not None and run.trace["status"] == "ok"
    batch = run.var(main, line_of(main, "for batch in loader"), "batch")
    # 3 batches and the loop's end: a header's names are counted on its hits, as for range()
    assert (batch["shape"], batch["hits"]) == ([4, 1], 4)


async def test_language_server_runs_ranks(lsp) -> None:  # type: ignore[no-untyped-def]
    from lsprotocol import types

    path, uri = lsp.write("ddp.py", "FAIL = False\n" + DDP)
    lsp.open(path)
    result = await lsp.run(uri, nprocPerNode=2)
    assert result["status"] == "ok", result
    shard_line = line_of(path, "shard =") - 1
    assert (await lsp.hints(uri))[shard_line] == "shard (8,3) r0 | (7,3) r1"
    codes = {d.code for d in lsp.client.diagnostics[uri] if d.range.start.line == shard_line}
    assert codes == {"rank_divergence"}
    hover = await lsp.client.text_document_hover_async(
        types.HoverParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            position=types.Position(shard_line, 1),
        )
    )
    assert hover is not None
    assert "| rank 1 | `(7,3) float32 cpu ×1` |" in hover.contents.value  # type: ignore[union-attr]


# -- how a distributed run ends: Ctrl-C, --timeout, cancel --------------------------------------
LOOP = """
import os
import sys
import time
import numpy as np
rank = int(os.environ.get("RANK", "0"))
step = 0
while True:
    grad = np.full((2, rank + 1), step)
    step += 1
    if step > 1000:  # waiting to be stopped: idle, so that ranks spinning take no core
        time.sleep(0.005)
    if step == 1000:
        sys.stdout.write(f"looping {rank} {os.getpid()}\\n")  # one write: ranks never interleave
        sys.stdout.flush()
"""

# Rank 1 holds the GIL in C (a backtracking regex, ~0.25 s a call idle, a few times that on
# a loaded machine: well inside the stop's 5 s wait for acknowledgements) from its first hit of
# ``grad =`` on: its flusher can answer a stop only a call later, after rank 0 has answered.
STALLING_LOOP = LOOP.replace(
    "    step += 1\n",
    "    step += 1\n"
    "    while rank == 1 and step > 1000:\n"
    "        __import__('re').match(r'(a+)+$', 'a' * 22 + 'b')\n",
)


def _wait_gone(pids: list[int], timeout: float = 30) -> None:
    """No rank outlives its run (a rank's own exit may lag the launcher by a moment)."""
    deadline = time.monotonic() + timeout
    while any(alive(pid) for pid in pids):
        assert time.monotonic() < deadline, [pid for pid in pids if alive(pid)]
        time.sleep(0.1)  # polling for the condition


def _read_lines(fd: int, marker: str, count: int, timeout: float) -> list[str]:
    """The first ``count`` lines starting with ``marker`` a process writes to ``fd``."""
    deadline = time.monotonic() + timeout
    found: list[str] = []
    pending = b""
    while len(found) < count:
        left = deadline - time.monotonic()
        assert left > 0, f"only {found} within {timeout}s"
        if select.select([fd], [], [], left)[0]:
            chunk = os.read(fd, 1 << 16)
            assert chunk, f"the run ended early; {found}"
            *lines, pending = (pending + chunk).split(b"\n")
            found += [line.decode() for line in lines if line.startswith(marker.encode())]
    return found


@pytest.mark.parametrize("nproc", [None, 2], ids=["single", "2-ranks"])
def test_ctrl_c_ends_the_run_like_python(script, tmp_path: Path, nproc: int | None) -> None:  # type: ignore[no-untyped-def]
    main = script(LOOP)
    trace_path = tmp_path / "trace.json"
    ranks = ("--nproc-per-node", str(nproc)) if nproc else ()
    process = subprocess.Popen(
        [sys.executable, "-m", "shapelens", "run", "--json", str(trace_path), "--quiet",
         *ranks, "main.py"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        start_new_session=True,  # its own process group, as a terminal gives a job
    )  # fmt: skip
    try:
        assert process.stdout is not None
        started = _read_lines(process.stdout.fileno(), "looping", nproc or 1, timeout=120)
        os.killpg(process.pid, signal.SIGINT)  # what Ctrl-C in a terminal does
        assert process.wait(timeout=60) == 130
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    trace = json.loads(trace_path.read_text())
    assert (trace["status"], trace["exit_code"]) == ("exception", 130)
    assert trace["exception"]["type"] == "KeyboardInterrupt"
    last = line_of(main, "sys.stdout.flush()")
    assert line_of(main, "while True") <= trace["exception"]["line"] <= last
    grad = next(
        v for e in trace["lines"] if e["line"] == line_of(main, "grad =") for v in e["vars"]
    )
    if nproc:
        assert [(r["rank"], r["shape"]) for r in grad["ranks"]] == [(0, [2, 1]), (1, [2, 2])]
    _wait_gone([int(line.split()[2]) for line in started])


def test_timeout_stops_every_rank_and_keeps_the_trace(script, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    main = script(LOOP)
    temp = tmp_path / "tmp"
    temp.mkdir()
    run = run_cli(
        "--nproc-per-node", "2", "--timeout", "20", "main.py", cwd=tmp_path, timeout=180,
        env={"TMPDIR": str(temp)},
    )  # fmt: skip
    assert run.returncode == 124, run.stderr
    assert run.trace is not None
    assert (run.trace["status"], run.trace["exit_code"]) == ("timeout", 124)
    assert run.trace["detail"].startswith("stopped by the time limit")
    grad = run.var(main, line_of(main, "grad ="), "grad")
    assert [(r["rank"], r["shape"]) for r in grad["ranks"]] == [(0, [2, 1]), (1, [2, 2])]
    assert all(r["hits"] >= 1000 for r in grad["ranks"])
    pids = [int(line.split()[2]) for line in run.stdout.splitlines() if line.startswith("looping")]
    assert len(pids) == 2, run.stdout
    _wait_gone(pids)
    # The folder that held the rank files is gone (torchrun leaves its own torchelastic_*).
    assert [p.name for p in temp.iterdir() if p.name.startswith("shapelens")] == []


async def test_language_server_cancels_ranks(lsp) -> None:  # type: ignore[no-untyped-def]
    from lsprotocol import types

    path, uri = lsp.write("loop.py", STALLING_LOOP)
    lsp.open(path)
    run = asyncio.ensure_future(lsp.run(uri, nprocPerNode=2))

    def started() -> list[str]:
        text = "\n".join(m.message for m in lsp.client.log_messages)
        return [line for line in text.splitlines() if line.startswith("looping")]

    deadline = time.monotonic() + 120
    while len(started()) < 2:  # both ranks are in the loop
        assert time.monotonic() < deadline and not run.done(), started()
        await asyncio.sleep(0.1)  # polling for the condition
    cancelled = await lsp.client.workspace_execute_command_async(
        types.ExecuteCommandParams(command="shapelens.cancel", arguments=[{"uri": uri}])
    )
    assert cancelled == {"cancelled": 1}
    result = await asyncio.wait_for(run, 60)
    assert result["status"] == "cancelled", result
    assert any("run of loop.py cancelled" in m.message for m in lsp.client.messages)
    hint = (await lsp.hints(uri))[line_of(path, "grad =") - 1]
    assert hint.startswith("grad (2,1) r0 | (2,2) r1"), hint
    _wait_gone([int(line.split()[2]) for line in started()])
