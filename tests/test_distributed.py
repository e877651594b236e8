"""Distributed and multi-process runs: torchrun ranks traced and merged, divergence found,
a failing rank reported, per-rank traces merged later, DataLoader workers harmless."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from shapelens.trace.codec import SCHEMA_PATH

from conftest import line_of, run_cli

torch = pytest.importorskip("torch")

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
    divergence = [f for f in run.findings("rank_divergence") if f["line"] == shard_line]
    assert len(divergence) == 1 and "(8,3) float32 cpu on rank 0" in divergence[0]["message"]
    data = run.var(main, line_of(main, "data ="), "data")
    assert [r["shape"] for r in data["ranks"]] == [[15, 3], [15, 3]]  # agreeing ranks: no finding
    assert "shard (8,3) r0 | (7,3) r1" in run.stderr


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
    run = run_cli(
        "--nproc-per-node", "2", "--quiet", "main.py", cwd=tmp_path, timeout=180,
        env={"SHAPELENS_TRACE_DIR": str(shared)},
    )  # fmt: skip
    assert run.returncode == 0
    assert sorted(p.name for p in shared.glob("rank-*.frames")) == [
        "rank-0.frames",
        "rank-1.frames",
    ]
    merged = tmp_path / "merged.json"
    done = subprocess.run(
        [sys.executable, "-m", "shapelens", "merge", str(shared), "-o", str(merged)],
        capture_output=True, text=True, timeout=60, cwd=tmp_path,
    )  # fmt: skip
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
    assert (batch["shape"], batch["hits"]) == ([4, 1], 3)


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
