"""Shape-only runs (``--fake``): the whole program on fake tensors, CUDA simulated on this
CPU-only machine; values it reads are simulated (``--stop-at-values``: it stops there)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from shapelens.runner.contract import RunRequest
from shapelens.runner.launcher import run_traced
from shapelens.runner.warm import WarmRunner
from shapelens.settings.groups import RunSettings, TracingOptions
from shapelens.settings.options import RunOptions
from shapelens.trace.codec import SCHEMA_PATH, trace_to_json

from conftest import CHILD_PYTHON, EXAMPLES, REPO, child_python, line_of, need, run_cli, warm_runner

torch = need("torch")

PROGRAM = REPO / "bench" / "workloads" / "gpt_shapes"
"""A GPT (model.py) and its training script (train.py) as people write them; the bench runs
them too, and measures the run's wall time and peak memory (`make bench`)."""


def _hint(stderr: str, code: str) -> str:
    row = next(
        r for r in stderr.splitlines() if "│" in r and r.split("│", 1)[1].strip().startswith(code)
    )
    return row.split("│", 1)[1].strip()[len(code) :].strip()


def test_seed_example_1_written_for_cuda_is_found_without_a_gpu(tmp_path: Path) -> None:
    example = tmp_path / "seed_cuda.py"
    source = (EXAMPLES / "seed_device_mask.py").read_text()
    example.write_text(source.replace('DEVICE = "meta"', 'DEVICE = "cuda"'))
    run = run_cli("--fake", example.name, cwd=tmp_path, timeout=120)
    assert run.returncode == 1, run.stderr
    assert run.trace is not None
    jsonschema.validate(run.trace, json.loads(SCHEMA_PATH.read_text()))
    assert run.trace["shape_only"]["simulated_cuda"] == (not torch.cuda.is_available())
    mask = run.var(example, line_of(example, "def myfunc"), "mask")
    assert (mask["dtype"], mask["device"]) == ("int64", "cuda:0")
    [device] = run.findings("device_mismatch")
    assert device["line"] == line_of(example, "y.masked_scatter_(mask, x)")
    assert device["related"][0]["line"] == line_of(example, "y = torch.zeros(6)")
    assert "cuda:0" in device["message"] and "meta" not in device["message"]
    # Every hint and the summary say the run was shape-only.
    assert _hint(run.stderr, "y = torch.zeros(6)") == "y (6,) cpu  [fake]"
    assert "shape-only run (fake tensors" in run.stderr.splitlines()[-1]


def test_a_billion_parameter_gpt_trains_on_simulated_cuda(  # type: ignore[no-untyped-def]
    script, tmp_path: Path
) -> None:
    for name in ("model.py", "train.py"):
        (tmp_path / name).write_text((PROGRAM / name).read_text())
    train = tmp_path / "train.py"
    probe = torch.nn.Linear(2048, 10)
    torch.save(probe.state_dict(), tmp_path / "probe.pt")  # a real checkpoint, loaded fake
    trace_path = tmp_path / "trace.json"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "shapelens",
            "run",
            *child_python(),
            "--fake",
            "--modules",
            "--json",
            str(trace_path),
            "train.py",
            "--steps",
            "2",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    stderr = done.stderr
    assert done.returncode == 0, stderr
    trace = json.loads(trace_path.read_text())
    # Past the first step: each log line's `loss.item()` got a simulated value.
    assert trace["status"] == "ok" and trace["exit_code"] == 0, trace["exception"]
    assert [line for line in done.stdout.splitlines() if line.startswith("step")] == [
        f"step {step} loss 0.500" for step in range(2)
    ]
    log_line = line_of(train, 'print(f"step {step} loss')
    assert trace["shape_only"]["simulated"] == [
        {"file": str(train.resolve()), "line": log_line, "values": 2, "decisions": 0}
    ]
    assert _hint(stderr, 'print(f"step {step} loss {loss.item():.3f}")') == "simulated read  [fake]"
    assert "2 values simulated" in next(
        r for r in stderr.splitlines() if "shapelens: shape-only run (" in r
    )
    # The model as it would run on the GPU: over a billion parameters, on cuda:0.
    root = trace["modules"][0]
    assert root["class"] == "GPT" and root["params"] > 1_000_000_000
    head = next(m for m in trace["modules"] if m["path"] == "head")
    assert head["outputs"][0] == {"shape": [8, 128, 50257], "dtype": "float32", "device": "cuda:0"}
    assert _hint(stderr, "x, y = x.to(device), y.to(device)") == "x y (8,128) i64  [fake]"
    assert _hint(stderr, "for step, (x, y) in enumerate(loader):").startswith(
        "step 0‥1  x y (8,128) i64 cpu"  # the loader's batches, before .to(device)
    )
    assert (
        _hint(stderr, "logits, loss = model(x, y)")
        == "logits (8,128,50257) grad  loss () grad  [fake]"
    )
    assert _hint(stderr, "att = F.softmax(att, dim=-1)") == "att (8,16,128,128)  [fake]"
    assert "torch.save('checkpoint.pt') skipped in a shape-only run" in stderr
    assert not (tmp_path / "checkpoint.pt").exists()


@pytest.mark.parametrize(
    ("statement", "said"),
    [
        ("print(loss.item())", "`.item()` reads a tensor's value"),
        ("print(loss)", "printing a tensor shows its values"),
        ("if loss > 1: pass", "an `if` on a tensor reads its value"),
        ("kept = w.nonzero()", "the result's shape depends on the tensor's values"),
    ],
)
def test_with_stop_at_values_a_value_read_ends_the_run(  # type: ignore[no-untyped-def]
    script, tmp_path: Path, statement: str, said: str
) -> None:
    """The old behaviour, for those who want it: the first value read ends the run."""
    main = script(
        f"""
        import torch
        w = torch.randn(3, 1, requires_grad=True)
        for step in range(5):
            x = torch.randn(4, 3)
            loss = (x @ w).pow(2).mean()
            loss.backward()
            {statement}
        """
    )
    run = run_cli("--fake", "--stop-at-values", "main.py", cwd=tmp_path, timeout=60)
    assert run.returncode == 0, run.stderr
    assert run.trace is not None and run.trace["status"] == "shape_only_stop"
    assert run.trace["exception"]["line"] == line_of(main, statement)
    assert run.trace["exception"]["message"].startswith(said)
    # Everything up to there is kept: one pass of the loop body.
    assert run.var(main, line_of(main, "loss = (x @ w)"), "loss")["shape"] == []
    assert _hint(run.stderr, "x = torch.randn(4, 3)") == "x (4,3)  [fake]"


def test_a_real_error_of_the_program_is_still_an_exception(script, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    main = script(
        """
        import torch
        layer = torch.nn.Linear(3, 4).to("cuda")
        x = torch.randn(2, 5, device="cuda")
        y = layer(x)
        """
    )
    run = run_cli("--fake", "main.py", cwd=tmp_path, timeout=60)
    assert run.returncode == 1
    assert run.trace is not None and run.trace["status"] == "exception"
    assert run.trace["exception"]["line"] == line_of(main, "y = layer(x)")
    assert "2x5 and 3x4" in run.trace["exception"]["message"]


async def test_the_language_server_runs_shapes_only(lsp) -> None:  # type: ignore[no-untyped-def]
    from lsprotocol import types

    path, uri = lsp.write(
        "main.py",
        """
        import torch
        model = torch.nn.Linear(3, 1).cuda()
        for step in range(3):
            x = torch.randn(4, 3, device="cuda")
            loss = model(x).pow(2).mean()
            loss.backward()
        print(loss.item())
        """,
    )
    lsp.open(path)
    summary = await lsp.run(uri, fake=True, stopAtValues=True)
    assert summary["status"] == "shape_only_stop" and summary["shapeOnly"] is True
    assert summary["simulatedValues"] == 0
    hints = await lsp.hints(uri)
    line = line_of(path, "x = torch.randn") - 1
    assert hints[line] == "x (4,3)  [fake]"
    hover = await lsp.client.text_document_hover_async(
        types.HoverParams(
            text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(line, 4)
        )
    )
    assert hover is not None
    text = hover.contents.value
    assert "cuda:0" in text and "Shape-only run (fake tensors)" in text, text
    # Where it stopped is information, not an error of the program.
    [stop] = [d for d in lsp.client.diagnostics.get(uri, []) if d.code == "shape_only_stop"]
    assert stop.severity == types.DiagnosticSeverity.Information
    assert stop.range.start.line == line_of(path, "print(loss.item())") - 1
    assert stop.message.startswith("shape-only run stopped here: `.item()` reads")
    assert not [d for d in lsp.client.diagnostics.get(uri, []) if d.code == "exception"]
    real = await lsp.run(uri)  # the same file without the flag: a real run, on the CPU here
    if not torch.cuda.is_available():
        assert real["status"] == "exception" and real["shapeOnly"] is False


def test_findings_are_as_in_a_real_run(script, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The classic broadcast of a regression loss, planted in a CUDA program."""
    main = script(
        """
        import torch
        model = torch.nn.Linear(3, 1).cuda()
        x = torch.randn(8, 3, device="cuda")
        y = torch.randn(8, device="cuda")
        for step in range(3):
            loss = ((model(x) - y) ** 2).mean()
            loss.backward()
        """
    )
    run = run_cli("--fake", "main.py", cwd=tmp_path, timeout=60)
    assert run.returncode == 0, run.stderr
    [broadcast] = run.findings("broadcast")
    assert broadcast["line"] == line_of(main, "loss = ((model(x) - y)")
    assert broadcast["related"][0]["line"] == line_of(main, "y = torch.randn(8")
    assert "cuda:0" in run.stderr and "meta" not in run.stderr


CORPUS = REPO / "tests" / "corpus"
SHAPE_ONLY_CORPUS = (
    "nanogpt/main.py", "word_lm/main.py",
    # Each of these stopped at a value before issue 39: `assert torch.allclose`, an index
    # from `.argmax()`, `pack_padded_sequence`. (All 32 clean programs run to their end
    # shape-only, by hand: issue 39's note; each of these runs all its epochs.)
    "box_matching.py", "gmm_em.py", "lstm_tagger_packed.py", "knn_kernels.py",
)  # fmt: skip


def _shape_only_run(entry: Path, warm: WarmRunner) -> dict[str, Any]:
    request = RunRequest(
        target=entry.name,
        cwd=str(entry.parent),
        env=dict(os.environ),
        options=RunOptions(
            tracing=TracingOptions(fake=True),
            run=RunSettings(interpreter=CHILD_PYTHON or sys.executable, timeout_s=240),
        ),
        capture_output=True,
        stdin="empty",
    )
    return trace_to_json(run_traced(request, warm=warm).trace)


def test_the_clean_corpus_raises_no_alarm_shapes_only() -> None:
    """Real-looking programs (nanoGPT's get_batch with its random positions, DataLoaders,
    random_split, synthetic data) run shape-only to their end, with no finding."""
    from concurrent.futures import ThreadPoolExecutor

    # Programs that run to their end within seconds on fake tensors (fake ops cost ~0.1 ms
    # each: char_gpt_rope takes 24 s); all 32, by hand, ran to their end with no finding
    # but torch's own warnings a real run shows too (issue 39's note).
    entries = [CORPUS / "clean" / name for name in SHAPE_ONLY_CORPUS]
    with warm_runner(dict(os.environ)) as warm, ThreadPoolExecutor(max_workers=2) as pool:
        traces = list(pool.map(lambda e: _shape_only_run(e, warm), entries))
    ran = {
        entry.relative_to(CORPUS).as_posix(): trace
        for entry, trace in zip(entries, traces, strict=True)
    }
    for name, trace in ran.items():
        assert trace["status"] == "ok", (name, trace.get("exception"))
        assert trace["shape_only"]["simulated_cuda"] == (not torch.cuda.is_available()), name
        # torch's own warning about the Transformer's settings, which a real run shows too.
        found = [
            f for f in trace["findings"] if "enable_nested_tensor is True" not in f.get("error", "")
        ]
        assert found == [], (name, found)
    # Past the data: nanoGPT's batches (random positions, real numbers) reach the model.
    nanogpt = ran["clean/nanogpt/main.py"]
    assert any(m["class"] == "GPT" for m in nanogpt["modules"])  # type: ignore[union-attr]


def test_random_positions_are_numbers_until_they_go_to_the_gpu(script, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    main = script(
        """
        import torch
        data = torch.arange(100)
        ix = torch.randint(len(data) - 8, (4,))
        x = torch.stack([data[i : i + 8] for i in ix])
        y = ix.to("cuda")
        z = ix.cuda() + torch.zeros(4, device="cuda", dtype=torch.long)
        """
    )
    run = run_cli("--fake", "main.py", cwd=tmp_path, timeout=60)
    assert run.returncode == 0 and run.trace is not None, run.stderr
    assert run.trace["status"] == "ok"
    assert run.var(main, line_of(main, "x = torch.stack"), "x")["shape"] == [4, 8]
    assert run.var(main, line_of(main, "y = ix.to"), "y")["device"] == "cuda:0"
    assert run.var(main, line_of(main, "z = ix.cuda()"), "z")["device"] == "cuda:0"
