"""A whole training script, run shape-only as "will it fit on a 24 GiB card?" asks it: a
config file, a DataLoader with a last smaller batch, `loss.item()` logged every step, an
evaluation every few steps with an accuracy from `.item()` and an early stop, a checkpoint
written to a temporary folder, sampling with `torch.multinomial` at the end. It reaches its
last line, and the peak and the line where a smaller budget runs out are right."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from conftest import REPO, line_of, need, run_cli

torch = need("torch")

SCRIPT = REPO / "tests" / "data" / "whole_script"


def _copy(tmp_path: Path, **config: Any) -> Path:
    for name in ("train.py", "model.py", "config.json"):
        shutil.copy(SCRIPT / name, tmp_path / name)
    if config:
        settings = json.loads((SCRIPT / "config.json").read_text()) | config
        (tmp_path / "config.json").write_text(json.dumps(settings))
    return tmp_path / "train.py"


def _parameter_bytes(tmp_path: Path) -> int:
    """What the model's parameters hold, each counted once (the head is tied to the
    embedding), as a real run would build it."""
    import sys

    sys.path.insert(0, str(tmp_path))
    try:
        from model import CharTransformer  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("model", None)
    config = json.loads((tmp_path / "config.json").read_text())
    text = "the quick brown fox jumps over the lazy dog. "
    model = CharTransformer(len(set(text)), config)
    return sum(p.numel() * p.element_size() for p in model.parameters())


def test_a_whole_script_reaches_its_last_line_on_a_24_gib_card(tmp_path: Path) -> None:
    train = _copy(tmp_path)
    run = run_cli("--fake", "--gpu-memory", "24GiB", "train.py", cwd=tmp_path, timeout=180)
    assert run.returncode == 0 and run.trace is not None, run.stderr[-3000:]
    trace = run.trace
    assert trace["status"] == "ok", trace["exception"]
    out = run.stdout.splitlines()
    assert out[-1] == "done" and out[-2].startswith("sample: ")
    assert "epoch 1 step 11 loss 0.5000" in out  # two epochs of 6 steps, the last smaller
    assert "step 10 val 0.5000 accuracy 0.003" in out  # 1 correct (an int) of 320 seen
    assert "early stop" in out  # the plateau's patience ran out, not the first epoch's
    hits = {(Path(line["file"]).name, line["line"]): line["hits"] for line in trace["lines"]}
    assert hits[("train.py", line_of(train, 'print("done")'))] == 1
    assert hits[("train.py", line_of(train, "torch.save(model.state_dict()"))] == 1
    x = run.var(train, line_of(train, "x, y = x.to(device), y.to(device)"), "x")
    assert x["shapes"] == [[32, 16], [29, 16]] and x["device"] == "cuda:0"
    assert not [f for f in trace["findings"] if f["kind"] == "out_of_memory"]
    # The peak on the simulated GPU: in a training step, with the weights, their gradients
    # and AdamW's two moments exactly as a real run holds them (the tied weight once).
    (gpu,) = [d for d in trace["memory"]["devices"] if d["device"] == "cuda:0"]
    weights = _parameter_bytes(tmp_path)
    assert gpu["breakdown"]["parameters"] == weights
    assert gpu["breakdown"]["gradients"] == weights
    assert gpu["breakdown"]["optimizer state"] == 2 * weights
    # In the backward (torch 2.13), or in a later step's attention (torch 2.4 keeps more).
    peak_at = (gpu["file"], gpu["line"])
    model_file = str(tmp_path / "model.py")
    assert peak_at == (str(train), line_of(train, "loss.backward()")) or gpu["file"] == model_file
    assert "of the 24.0 GiB budget" in run.stderr
    # A smaller budget runs out where the run's memory went over it, and the run still
    # reaches its end. (Not a byte under the peak: when the garbage collector frees a cycle
    # moves a peak by a few KiB from run to run.)
    budget = gpu["peak_bytes"] * 9 // 10
    small = run_cli("--fake", "--gpu-memory", f"{budget}B", "train.py", cwd=tmp_path, timeout=180)
    assert small.trace is not None and small.trace["status"] == "ok", small.stderr[-3000:]
    assert small.stdout.splitlines()[-1] == "done"
    (oom,) = [f for f in small.trace["findings"] if f["kind"] == "out_of_memory"]
    over = {
        (cost["file"], cost["line"])
        for cost in small.trace["memory"]["lines"]
        if cost["device"] == "cuda:0" and cost["peak_bytes"] > budget
    }
    assert (oom["file"], oom["line"]) in over
    step = range(
        line_of(train, "logits, loss = model(x, y)"), line_of(train, "optimizer.step()") + 1
    )
    assert oom["file"] == model_file or (oom["file"] == str(train) and oom["line"] in step)
    (again,) = [d for d in small.trace["memory"]["devices"] if d["device"] == "cuda:0"]
    assert abs(again["peak_bytes"] - gpu["peak_bytes"]) < gpu["peak_bytes"] / 100


async def test_the_editor_shows_the_script_s_simulated_values(lsp) -> None:  # type: ignore[no-untyped-def]
    from lsprotocol import types

    train = _copy(lsp.root, epochs=1)
    uri = train.as_uri()
    lsp.open(train)
    summary = await lsp.run(uri, fake=True)
    assert summary["status"] == "ok" and summary["shapeOnly"] is True
    # Six steps logged, two evaluations (a loss and a count read per batch, a comparison),
    # then the sample's tokens.
    assert summary["simulatedValues"] > 10
    hints = await lsp.hints(uri)

    def at(code: str) -> int:
        return line_of(train, code) - 1

    assert hints[at('print(f"epoch {epoch} step {step} loss')] == "simulated read  [fake]"
    assert hints[at("if val_loss < best_val:")] == "branch on simulated value  [fake]"
    assert hints[at("losses.append(loss.item())")] == "simulated read  [fake]"
    assert hints[at("correct += ")].startswith("correct simulated")
    assert hints[at("sample = model.generate(")] == "simulated read  [fake]"  # .tolist()
    line = at("val_loss, accuracy = evaluate()")
    column = train.read_text().splitlines()[line].index("accuracy")
    hover = await lsp.client.text_document_hover_async(
        types.HoverParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            position=types.Position(line, column),
        )
    )
    assert hover is not None
    assert "`simulated float`" in hover.contents.value
    assert "Not a real value" in hover.contents.value
