"""Distributed truth: collectives that disagree across ranks, hangs explained, a rank's death
kept and named, sharded tensors shown whole and as shards, and clean DDP and FSDP2 training
left alone. Each test runs a data-parallel training script under torchrun (gloo, CPU) with a
hard time limit, through ``shapelens run --nproc-per-node N`` or the language server."""

from __future__ import annotations

import functools
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from shapelens.trace.codec import SCHEMA_PATH

from conftest import CHILD_PYTHON, _fork_server, child_python, line_of, need, rendered, run_cli

torch = need("torch")
if not torch.distributed.is_available():
    pytest.skip("this torch has no torch.distributed", allow_module_level=True)

DATA = Path(__file__).parent / "data"
RUN_LIMIT = ("--timeout", "90")
"""Each run's own limit; the test's subprocess limit is above it."""


def _project(tmp_path: Path, name: str) -> Path:
    """A copy of ``tests/data/NAME`` as the project folder (its helpers are user code)."""
    folder = tmp_path / name
    shutil.copytree(DATA / name, folder)
    return folder


def _kinds(trace: dict[str, Any]) -> list[str]:
    return [f["kind"] for f in trace["findings"]]


def _valid(trace: dict[str, Any]) -> None:
    jsonschema.validate(trace, json.loads(SCHEMA_PATH.read_text()))


# -- collective mismatch --------------------------------------------------------------------
def test_an_uneven_metric_all_reduce_names_each_rank_and_the_split(tmp_path: Path) -> None:
    project = _project(tmp_path, "ddp_train")
    train, data = project / "train.py", project / "data.py"
    run = run_cli(
        "--nproc-per-node", "3", *RUN_LIMIT, "train.py", "--shard", "manual",
        cwd=project, timeout=150,
    )  # fmt: skip
    assert run.returncode != 0 and run.trace is not None, run.stderr
    _valid(run.trace)
    call_line = line_of(train, "dist.all_reduce(per_sample)")
    [mismatch] = run.findings("collective_mismatch")
    assert (mismatch["line"], mismatch["op"], mismatch["state"]) == (
        call_line,
        "all_reduce",
        "shape",
    )
    # 47 samples over 3 ranks: 16, 16 and 15 per-sample losses, each rank's call named
    assert [(c["rank"], c["line"], [(t["name"], t["shape"]) for t in c["tensors"]]) for c in
            mismatch["calls"]] == [
        (0, call_line, [("per_sample", [16])]),
        (1, call_line, [("per_sample", [16])]),
        (2, call_line, [("per_sample", [15])]),
    ]  # fmt: skip
    assert mismatch["message"] == (
        "collective mismatch: `all_reduce` called with different shapes: "
        "rank 0 `per_sample` (16,) float32 cpu at train.py:79, "
        "rank 1 `per_sample` (16,) float32 cpu at train.py:79, "
        "rank 2 `per_sample` (15,) float32 cpu at train.py:79"
    ).replace("79", str(call_line))
    # The chain starts where the sizes began to differ: the uneven split in the helper.
    chain = mismatch["chain"]
    split_line = line_of(data, "indices = ")
    assert (chain[0]["file"], chain[0]["line"]) == (str(data), split_line)
    assert [r["shape"] for r in chain[0]["ranks"]] == [[16], [16], [15]]
    # What the mismatch did to the ranks (gloo aborts one, the others lose their connection)
    # is its chain, never a finding of its own, never a shape_mismatch.
    consequences = [step for step in chain if "note" in step]
    assert {step["subject"] for step in consequences} == {"rank 0", "rank 1", "rank 2"}
    # (gloo's ring lets a rank finish this call with wrong sums and fail at its next one)
    collective_lines = {
        n for n, text in enumerate(train.read_text().splitlines(), 1) if "dist.all_reduce(" in text
    }
    assert {step["line"] for step in consequences} <= collective_lines, consequences
    assert _kinds(run.trace) == ["collective_mismatch"]
    ranks = run.trace["ranks"]
    assert {r["line"] for r in ranks} <= collective_lines
    aborted = [r for r in ranks if r["signal"] == "SIGABRT"]
    assert aborted and all(r["how"] == "killed by SIGABRT in all_reduce" for r in aborted)
    assert run.trace["exception"]["message"].endswith(
        f"(after the collective mismatch at train.py:{call_line})"
    )
    assert "per_sample (16,) r0 | (16,) r1 | (15,) r2" in run.stderr


def test_collectives_in_a_different_order_are_named_on_both_lines(tmp_path: Path) -> None:
    project = _project(tmp_path, "ddp_train")
    train = project / "train.py"
    run = run_cli(
        "--nproc-per-node", "2", *RUN_LIMIT, "train.py", "--bug", "swapped",
        cwd=project, timeout=150,
    )  # fmt: skip
    # gloo sums the count into the loss and the loss into the count: no error, wrong numbers
    assert run.returncode == 0 and run.trace is not None, run.stderr
    assert "epoch 0 loss 1.0000" in run.stdout
    _valid(run.trace)
    found = run.findings("collective_mismatch")
    lines = {name: line_of(train, f"dist.all_reduce({name})") for name in ("loss_sum", "count")}
    swapped = {
        name: [n for n, text in enumerate(train.read_text().splitlines(), 1)
               if text.strip() == f"dist.all_reduce({name})"]
        for name in ("loss_sum", "count")
    }  # fmt: skip
    # every rank's line carries it: rank 0's two calls and rank 1's two, swapped
    expected = sorted(line for both in swapped.values() for line in both)
    assert sorted(f["line"] for f in found) == expected
    assert all(f["state"] == "order" for f in found)
    first = found[0]
    assert [(c["rank"], c["tensors"][0]["name"]) for c in first["calls"]] == [
        (0, "loss_sum"), (0, "count"), (1, "count"), (1, "loss_sum"),
    ]  # fmt: skip
    rank0 = f"rank 0 calls all_reduce(`loss_sum`) at train.py:{swapped['loss_sum'][1]} then "
    rank0 += f"all_reduce(`count`) at train.py:{swapped['count'][1]}"
    rank1 = f"rank 1 calls all_reduce(`count`) at train.py:{lines['count']} then "
    rank1 += f"all_reduce(`loss_sum`) at train.py:{lines['loss_sum']}"
    assert first["message"] == (
        f"collective mismatch: collectives called in a different order: {rank0}; {rank1}"
    )
    assert set(_kinds(run.trace)) == {"collective_mismatch"}


# -- hangs ----------------------------------------------------------------------------------
def test_a_hang_is_stopped_by_the_collective_timeout_and_explained(tmp_path: Path) -> None:
    project = _project(tmp_path, "ddp_train")
    train = project / "train.py"
    started = time.monotonic()
    run = run_cli(
        "--nproc-per-node", "2", *RUN_LIMIT, "--collective-timeout", "3", "train.py",
        "--bug", "lone-barrier", cwd=project, timeout=150,
    )  # fmt: skip
    assert time.monotonic() - started < 60, "the collective timeout did not end the hang"
    assert run.returncode == 124 and run.trace is not None, run.stderr
    _valid(run.trace)
    assert run.trace["status"] == "timeout"
    assert "(--collective-timeout)" in run.trace["detail"]
    barrier = line_of(train, "dist.barrier()  # only rank 0")
    backward = line_of(train, "loss.mean().backward()")
    hangs = run.findings("distributed_hang")
    assert sorted(f["line"] for f in hangs) == [backward, barrier]
    calls = [(c["rank"], c["state"], c["op"], c["line"]) for c in hangs[0]["calls"]]
    assert calls == [(0, "waiting", "barrier", barrier), (1, "blocked", None, backward)]
    assert hangs[0]["message"] == (
        f"distributed hang: the ranks wait and cannot meet: rank 0 in barrier at "
        f"train.py:{barrier}, rank 1 in backward (DDP all-reduces gradients there) at "
        f"train.py:{backward}; they wait in different collectives"
    )
    # each rank's stack through the user's code: main() called from the script's last line
    main_call = line_of(train, "main()")
    assert any(r["line"] == main_call for r in hangs[0]["related"])
    assert [(r["rank"], r["how"]) for r in run.trace["ranks"]] == [
        (0, "stopped while waiting in barrier"), (1, "stopped while running"),
    ]  # fmt: skip
    assert set(_kinds(run.trace)) <= {"distributed_hang", "rank_divergence"}


# -- a rank's death -------------------------------------------------------------------------
def test_a_rank_killed_outright_keeps_its_trace_and_is_named(tmp_path: Path) -> None:
    project = _project(tmp_path, "ddp_train")
    train = project / "train.py"
    trace_path = tmp_path / "trace.json"
    command = [
        sys.executable, "-m", "shapelens", "run", *child_python(), "--json", str(trace_path),
        "--nproc-per-node", "2", *RUN_LIMIT, "train.py", "--stall-rank", "1",
    ]  # fmt: skip
    process = subprocess.Popen(
        command, cwd=project, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, **_fork_server(None)}, start_new_session=True,
    )  # fmt: skip
    try:
        assert process.stdout is not None
        deadline = time.monotonic() + 120
        line = ""
        while not line.startswith("stalling"):
            assert time.monotonic() < deadline, "rank 1 never reached its slow step"
            line = process.stdout.readline()
            assert line, "the run ended before rank 1 stalled"
        time.sleep(1.0)  # a few of its flushes (every 0.25 s) see where it is
        os.kill(int(line.split()[1]), signal.SIGKILL)  # as the OOM killer does
        _, stderr = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    trace = json.loads(trace_path.read_text())
    _valid(trace)
    sleep_line = line_of(train, "time.sleep(600)")
    ranks = {r["rank"]: r for r in trace["ranks"]}
    assert (ranks[1]["signal"], ranks[1]["how"], ranks[1]["line"]) == (
        "SIGKILL", "killed by SIGKILL", sleep_line,
    )  # fmt: skip
    [death] = [rendered(f) for f in trace["findings"] if f["kind"] == "rank_exception"]
    assert (death["rank"], death["line"]) == (1, sleep_line)
    assert death["message"] == "rank 1 died here: killed by SIGKILL"
    # rank 0 waited inside DDP's backward: what befell it is a consequence, in the chain
    [consequence] = death["chain"]
    assert consequence["subject"] == "rank 0"
    assert consequence["line"] == line_of(train, "loss.mean().backward()")
    # it lost its connection, or torchrun stopped it first (whichever came first)
    note = consequence["note"]
    assert note.endswith("in backward") or note.startswith("stopped by torchrun (SIGTERM)"), note
    assert _kinds(trace) == ["rank_exception"], stderr
    # what rank 1 recorded up to its last line is kept: its epoch-1 batches
    print_line = line_of(train, 'print(f"stalling')
    entry = next(e for e in trace["lines"] if e["line"] == print_line)
    assert entry["hits"] == 1
    x = next(
        v for e in trace["lines"] if e["line"] == line_of(train, "for x, y in loader")
        for v in e["vars"] if v["name"] == "x"
    )  # fmt: skip
    assert [r["rank"] for r in x["ranks"]] == [0, 1]


# -- clean training and sharded tensors -----------------------------------------------------
def test_clean_ddp_training_gives_no_finding(tmp_path: Path) -> None:
    project = _project(tmp_path, "ddp_train")
    run = run_cli("--nproc-per-node", "2", *RUN_LIMIT, "train.py", cwd=project, timeout=150)
    assert run.returncode == 0 and run.trace is not None, run.stderr
    assert run.trace["findings"] == []
    assert [r["how"] for r in run.trace["ranks"]] == ["ran to its end"] * 2
    assert "epoch 2 loss" in run.stdout
    assert (project / "checkpoints" / "epoch2.pt").exists()


@functools.cache
def _fsdp2_on_cpu() -> bool:
    """Whether the traced programs' torch has FSDP2 on the CPU (public since 2.6; torch 2.4's
    needs CUDA)."""
    check = "import torch.distributed.fsdp as f; raise SystemExit(not hasattr(f, 'fully_shard'))"
    python = CHILD_PYTHON or sys.executable
    return subprocess.run([python, "-c", check], capture_output=True, timeout=120).returncode == 0


def test_fsdp2_parameters_show_their_global_shape_and_shards(tmp_path: Path) -> None:
    if not _fsdp2_on_cpu():
        pytest.skip("this torch's FSDP2 needs CUDA")
    project = _project(tmp_path, "fsdp_train")
    train = project / "train.py"
    run = run_cli(
        "--nproc-per-node", "2", *RUN_LIMIT, "--modules", "train.py", cwd=project, timeout=150,
    )  # fmt: skip
    assert run.returncode == 0 and run.trace is not None, run.stderr
    _valid(run.trace)
    assert run.trace["findings"] == []
    assert "step 3 loss" in run.stdout and list(project.glob("fsdp-*-checkpoint.pt"))
    weight = run.var(train, line_of(train, "weight = "), "weight")
    assert (weight["shape"], weight["placements"]) == ([128, 32], "Shard(0)")
    assert [(r["rank"], r["shape"], r["local_shape"]) for r in weight["ranks"]] == [
        (0, [128, 32], [64, 32]), (1, [128, 32], [64, 32]),
    ]  # fmt: skip
    assert "weight (128,32) Shard(0) → (64,32) per rank grad" in run.stderr
    # the module tree counts parameters once, whole, with what each rank holds: the head's
    # 5 output rows are sharded 3 and 2
    heads = {m["rank"]: m for m in run.trace["modules"] if m["path"] == "head"}
    assert heads[0]["params"] == heads[1]["params"] == 5 * 32 + 5
    assert (heads[0]["shard_bytes"], heads[1]["shard_bytes"]) == (
        (3 * 32 + 3) * 4,
        (2 * 32 + 2) * 4,
    )
    assert "head [r1]" in run.stderr and "165 (264 B/rank)" in run.stderr


def test_a_shape_only_fsdp2_run_keeps_each_ranks_memory_and_finds_a_mismatch(
    tmp_path: Path,
) -> None:
    if not _fsdp2_on_cpu():
        pytest.skip("this torch's FSDP2 needs CUDA")
    project = _project(tmp_path, "fsdp_train")
    train = project / "train.py"
    run = run_cli(
        "--nproc-per-node", "2", *RUN_LIMIT, "--fake", "--modules", "train.py", "--eval",
        "manual", cwd=project, timeout=150,
    )  # fmt: skip
    # fake tensors carry no data: the uneven all_reduce is not sent, so nothing aborts, and
    # the ranks' calls are compared all the same
    assert run.returncode == 0 and run.trace is not None, run.stderr
    _valid(run.trace)
    assert (run.trace["status"], run.trace["shape_only"]["simulated_cuda"]) == ("ok", True)
    [mismatch] = run.findings("collective_mismatch")
    assert mismatch["line"] == line_of(train, "dist.all_reduce(per_sample)")
    assert [c["tensors"][0]["shape"] for c in mismatch["calls"]] == [[21], [20]]
    assert mismatch["chain"][0]["line"] == line_of(train, "indices = torch.arange")
    # each rank's memory is its own: AdamW keeps two moments of the rank's shards (and a
    # 4-byte step per parameter), which differ by the head's uneven rows
    peaks = {d["rank"]: d for d in run.trace["memory"]["devices"]}
    roots = {m["rank"]: m for m in run.trace["modules"] if m["path"] == ""}
    assert sorted(peaks) == [0, 1] and roots[0]["shard_bytes"] != roots[1]["shard_bytes"]
    parameters = 16
    for rank in (0, 1):
        breakdown = peaks[rank]["breakdown"]
        assert breakdown["optimizer state"] == 2 * roots[rank]["shard_bytes"] + 4 * parameters
        # at the peak a block's parameters are gathered whole, beside every rank's shards
        assert breakdown["parameters"] > roots[rank]["shard_bytes"]
    assert "memory: peak" in run.stderr and "of rank 1" in run.stderr


def test_a_shape_only_ddp_run_stops_at_ddp_and_says_what_to_do(tmp_path: Path) -> None:
    project = _project(tmp_path, "ddp_train")
    run = run_cli(
        "--nproc-per-node", "2", *RUN_LIMIT, "--fake", "train.py", cwd=project, timeout=150
    )
    assert run.returncode == 0 and run.trace is not None, run.stderr
    assert run.trace["status"] == "shape_only_stop"
    assert run.trace["exception"]["line"] == line_of(project / "train.py", "model = Distributed")
    assert "run --fake without --nproc-per-node" in run.trace["exception"]["message"]
    assert run.trace["findings"] == []


# -- in the editor --------------------------------------------------------------------------
async def test_language_server_shows_a_mismatch_on_the_call_with_each_rank(lsp) -> None:  # type: ignore[no-untyped-def]
    from lsprotocol import types

    project = lsp.root
    for name in ("train.py", "data.py", "config.json"):
        shutil.copy(DATA / "ddp_train" / name, project / name)
    train = project / "train.py"
    uri = lsp.open(train)
    result = await lsp.run(uri, nprocPerNode=2, args=["--shard", "manual"])
    assert result["status"] == "crashed", result
    call = line_of(train, "dist.all_reduce(per_sample)") - 1
    [diagnostic] = [d for d in lsp.client.diagnostics[uri] if d.code == "collective_mismatch"]
    assert diagnostic.range.start.line == call
    assert diagnostic.severity == types.DiagnosticSeverity.Error
    assert "rank 0 `per_sample` (24,) float32 cpu" in diagnostic.message
    assert "rank 1 `per_sample` (23,) float32 cpu" in diagnostic.message
    related = [
        (Path(r.location.uri.removeprefix("file://")).name, r.location.range.start.line + 1,
         r.message)
        for r in diagnostic.related_information or []
    ]  # fmt: skip
    split = line_of(project / "data.py", "indices = ")
    assert ("data.py", split, "`indices` differs the same way: (24,) int64 cpu on rank 0, "
            "(23,) int64 cpu on rank 1") in related  # fmt: skip
    assert ("train.py", call + 1, "rank 1 calls all_reduce here with `per_sample` (23,) "
            "float32 cpu") in related  # fmt: skip
    # no other error on the call's line: the dropped connection is in the chain
    codes = {d.code for d in lsp.client.diagnostics[uri] if d.range.start.line == call}
    assert codes <= {"collective_mismatch", "exception"}, codes
    assert (await lsp.hints(uri))[call - 1] == "per_sample (24,) r0 | (23,) r1"


async def test_language_server_explains_a_hang_on_three_ranks(lsp) -> None:  # type: ignore[no-untyped-def]
    project = lsp.root
    for name in ("train.py", "data.py", "config.json"):
        shutil.copy(DATA / "ddp_train" / name, project / name)
    train = project / "train.py"
    uri = lsp.open(train)
    started = time.monotonic()
    result = await lsp.run(uri, nprocPerNode=3, collectiveTimeout=3, args=["--bug", "lone-barrier"])
    assert time.monotonic() - started < 90
    assert result["status"] == "timeout", result
    barrier = line_of(train, "dist.barrier()  # only rank 0") - 1
    backward = line_of(train, "loss.mean().backward()") - 1
    hangs = [d for d in lsp.client.diagnostics[uri] if d.code == "distributed_hang"]
    assert sorted(d.range.start.line for d in hangs) == [backward, barrier]
    assert "rank 0 in barrier" in hangs[0].message
    assert "rank 1 in backward" in hangs[0].message and "rank 2 in backward" in hangs[0].message


async def test_language_server_shows_sharded_parameters(lsp) -> None:  # type: ignore[no-untyped-def]
    from lsprotocol import types

    if not _fsdp2_on_cpu():
        pytest.skip("this torch's FSDP2 needs CUDA")
    project = lsp.root
    shutil.copy(DATA / "fsdp_train" / "train.py", project / "train.py")
    train = project / "train.py"
    uri = lsp.open(train)
    result = await lsp.run(uri, nprocPerNode=2, args=["--steps", "2"])
    assert result["status"] == "ok", result
    line = line_of(train, "weight = ") - 1
    # the decoration the extension draws (an inlay hint is cut at maxHintLength, 43 here)
    labels = {e["line"]: e["label"] for e in lsp.trace_updates[-1]["lines"]}
    assert labels[line] == "weight (128,32) Shard(0) → (64,32) per rank grad"
    hover = await lsp.client.text_document_hover_async(
        types.HoverParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            position=types.Position(line, 5),
        )
    )
    assert hover is not None
    text = hover.contents.value  # type: ignore[union-attr]
    assert "| global shape | `(128,32)` |" in text and "| placements | `Shard(0)` |" in text
    assert "shard (64,32)" in text
    assert [d for d in lsp.client.diagnostics.get(uri, []) if d.code] == []
