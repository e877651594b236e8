"""A torch call that fails on a hit the op watch does not follow (the last, smaller batch of
an epoch, long after the first hits) is explained as on hit 1: the call, every operand as
passed, and the chain back to the line where the wrong size was written. The failing
statement runs again on fake copies, leaving the program's tensors and output as they were."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import CHILD_PYTHON, LspSession, line_of, need, run_cli

need("torch")

MODEL = """
import torch
from torch import nn


class Classifier(nn.Module):
    def __init__(self, batch_size, features=784, classes=10):
        super().__init__()
        self.batch_size = batch_size
        self.fc1 = nn.Linear(features, 64)
        self.fc2 = nn.Linear(64, classes)

    def forward(self, images):
        flat = images.view(self.batch_size, -1)
        hidden = torch.relu(self.fc1(flat))
        return self.fc2(hidden)
"""

TRAIN = """
import argparse

import torch
from torch.utils.data import DataLoader, TensorDataset

from model import Classifier

parser = argparse.ArgumentParser()
parser.add_argument("--batch-size", type=int, default=16)
parser.add_argument("--samples", type=int, default=2008)
args = parser.parse_args()

torch.manual_seed(0)
data = TensorDataset(torch.randn(args.samples, 1, 28, 28), torch.randint(0, 10, (args.samples,)))
loader = DataLoader(data, batch_size=args.batch_size, shuffle=True)
model = Classifier(args.batch_size)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
loss_fn = torch.nn.CrossEntropyLoss()

for step, (images, labels) in enumerate(loader):
    logits = model(images)
    loss = loss_fn(logits, labels)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if step % 50 == 0:
        print(f"step {step} loss {loss.item():.3f}")
"""


def _error(run: Any) -> dict[str, Any]:
    assert run.trace is not None, run.stderr
    errors = [f for f in run.trace["findings"] if f["severity"] == "error"]
    assert len(errors) == 1, run.trace["findings"]
    [finding] = run.findings(errors[0]["kind"])
    return finding  # type: ignore[no-any-return]


def test_the_last_smaller_batch_is_explained_as_on_hit_one(script, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """2008 samples in batches of 16: the 126th batch holds 8, and the batch size written
    into ``view`` makes (16, 392) of it, which fc1 (784 in) refuses. By then reads and the op
    watch have long been sampling: the failure alone has to tell the whole story."""
    model = script(MODEL, "model.py")
    train = script(TRAIN, "train.py")
    run = run_cli("train.py", cwd=tmp_path)
    assert run.returncode == 1
    assert "mat1 and mat2 shapes cannot be multiplied (16x392 and 784x64)" in run.stderr
    finding = _error(run)
    assert (finding["kind"], finding["line"]) == ("shape_mismatch", line_of(model, "hidden ="))
    # The program's own error, not the replay's (a fake kernel words it otherwise).
    assert finding["error"] == "mat1 and mat2 shapes cannot be multiplied (16x392 and 784x64)"
    assert finding["op"] == "`self.fc1` (Linear)"
    operands = {o["name"]: o for o in finding["operands"]}
    assert operands["flat"]["shape"] == [16, 392]
    assert operands["self.fc1"]["module"]["expects"] == {"in_features": 784}
    chain = [(Path(s["file"]).name, s["line"], s.get("op")) for s in finding["chain"]]
    assert chain == [
        ("train.py", line_of(train, "for step, (images"), None),  # the batch of 8 came from
        ("model.py", line_of(model, "flat ="), "Tensor.view"),  # where 16 was written in
    ]
    assert finding["chain"][0]["after"]["shape"] == [8, 1, 28, 28]
    assert finding["chain"][1]["after"]["shape"] == [16, 392]


def test_a_last_batch_on_a_checked_hit_starts_at_the_loader_not_the_dataset(  # type: ignore[no-untyped-def]
    script, tmp_path: Path
) -> None:
    """1016 samples: the smaller batch is the 64th, a hit the op watch follows whole, the
    loader's indexing and stacking included. The chain starts at the batch of 8 the loader
    made, not at the dataset's tensor the batch was stacked from."""
    model = script(MODEL, "model.py")
    train = script(TRAIN, "train.py")
    run = run_cli("train.py", "--samples", "1016", cwd=tmp_path)
    assert run.returncode == 1
    finding = _error(run)
    assert finding["line"] == line_of(model, "hidden =")
    chain = [(Path(s["file"]).name, s["line"]) for s in finding["chain"]]
    assert chain == [
        ("train.py", line_of(train, "for step, (images")),
        ("model.py", line_of(model, "flat =")),
    ]
    assert finding["chain"][0]["after"]["shape"] == [8, 1, 28, 28]


ATTENTION = """
import math

import torch
from torch import nn


class Attention(nn.Module):
    def __init__(self, width=32, heads=4):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(width, 3 * width)

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.qkv(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2) for t in (q, k, v))
        att = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(k.size(-1)), dim=-1)
        y = att @ v
        return y.transpose(1, 2).contiguous().view(8, T, C)


class Model(nn.Module):
    def __init__(self, vocab=50, width=32):
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.attn = Attention(width)
        self.head = nn.Linear(width, vocab)

    def forward(self, idx):
        x = self.embed(idx)
        return self.head(self.attn(x))
"""

ATTENTION_TRAIN = """
import torch
from torch.utils.data import DataLoader, TensorDataset

from model import Model

torch.manual_seed(0)
data = torch.randint(0, 50, (70, 17))
loader = DataLoader(TensorDataset(data[:, :-1], data[:, 1:]), batch_size=8)
model = Model()
optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
for epoch in range(2):
    for xb, yb in loader:
        logits = model(xb)
        loss = torch.nn.functional.cross_entropy(logits.view(-1, 50), yb.reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
"""


@pytest.mark.backend  # a comprehension's frame is the interpreter's
def test_a_chain_goes_through_a_generator_expression(script, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """q, k and v reshaped in a generator expression (a frame of its own, consumed by the
    statement that unpacks it): its calls are that statement's. The batch of 6 that the
    written 8 refuses is followed back through them to the loader that made it."""
    model = script(ATTENTION, "model.py")
    train = script(ATTENTION_TRAIN, "train.py")
    run = run_cli("train.py", cwd=tmp_path)
    assert run.returncode == 1
    assert "shape '[8, 16, 32]' is invalid for input of size 3072" in run.stderr
    finding = _error(run)
    failed_at = line_of(model, "return y.transpose")
    assert (finding["kind"], finding["line"]) == ("shape_mismatch", failed_at)
    chain = [(Path(s["file"]).name, s["line"], s.get("op")) for s in finding["chain"]]
    reshaped = line_of(model, "q, k, v = (t.view")
    assert chain[0] == ("train.py", line_of(train, "for xb, yb in loader"), None), chain
    assert chain[0:1] + [step for step in chain if step[1] == reshaped] == [
        chain[0],
        ("model.py", reshaped, "Tensor.view"),
        ("model.py", reshaped, "Tensor.transpose"),
    ], chain
    assert finding["chain"][0]["after"]["shape"] == [6, 16]


DEEP_MODEL = """
import torch
from torch import nn


class MLP(nn.Module):
    def __init__(self, batch_size, features=784, width=64, depth=3, classes=10):
        super().__init__()
        self.batch_size = batch_size
        sizes = [features] + [width] * depth
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in zip(sizes, sizes[1:]))
        self.head = nn.Linear(width, classes)

    def forward(self, images):
        x = images.view(self.batch_size, -1)
        for layer in self.layers:
            x = torch.relu(layer(x))
        return self.head(x)
"""


SLICED_TRAIN = """
import argparse

import torch

from model import MLP

parser = argparse.ArgumentParser()
parser.add_argument("--batch-size", type=int, default=16)
parser.add_argument("--samples", type=int, default=1368)
args = parser.parse_args()

torch.manual_seed(0)
inputs = torch.randn(args.samples, 1, 28, 28)
targets = torch.randint(0, 10, (args.samples,))
model = MLP(args.batch_size)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)

for start in range(0, args.samples, args.batch_size):
    images = inputs[start : start + args.batch_size]
    labels = targets[start : start + args.batch_size]
    loss = torch.nn.functional.cross_entropy(model(images), labels)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


def test_a_failure_seen_on_its_own_checked_hit_still_goes_back_to_the_batch(  # type: ignore[no-untyped-def]
    script, tmp_path: Path
) -> None:
    """1368 samples sliced in batches of 16: the 86th holds 8. The layers' statement runs
    three times a step, so its hit there is the 256th, which the op watch follows, while
    the slice and the `view` that made its operand ran unwatched and unread. Seeing the
    failing call is not enough: the chain still goes back to the slice and the `view`."""
    model = script(DEEP_MODEL, "model.py")
    train = script(SLICED_TRAIN, "train.py")
    run = run_cli("train.py", cwd=tmp_path)
    assert run.returncode == 1
    finding = _error(run)
    assert finding["kind"] == "shape_mismatch"
    assert finding["line"] == line_of(model, "x = torch.relu")
    assert finding["op"] == "`layer` (Linear)"
    chain = [(Path(s["file"]).name, s["line"], s.get("op")) for s in finding["chain"]]
    assert chain == [
        ("train.py", line_of(train, "images = inputs"), None),
        ("model.py", line_of(model, "x = images.view"), "Tensor.view"),
    ]
    assert finding["chain"][0]["after"]["shape"] == [8, 1, 28, 28]
    assert finding["chain"][1]["after"]["shape"] == [16, 392]


FORWARD_THAT_PRINTS = """
import torch
from torch import nn

torch.manual_seed(0)
norm = nn.BatchNorm1d(4)
head = nn.Linear(4, 2)


def forward(batch, rows):
    print("forward", batch.shape[0])
    normed = norm(batch)
    return head(normed.reshape(rows, -1))


batches = [torch.randn(8, 4) for _ in range(300)] + [torch.randn(6, 4)]
try:
    for batch in batches:
        out = forward(batch, 8)
except RuntimeError as err:
    print("caught:", str(err).splitlines()[0])
print("tracked", int(norm.num_batches_tracked), round(float(norm.running_mean.sum()), 6))
"""


def test_a_replay_leaves_the_programs_tensors_and_output_alone(script, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The program catches the error and goes on: its BatchNorm's running statistics and
    what it prints are those of plain ``python``, though the failing call ran again."""
    main = script(FORWARD_THAT_PRINTS)
    plain = subprocess.run(
        [CHILD_PYTHON or sys.executable, "main.py"], cwd=tmp_path, capture_output=True, text=True
    )
    run = run_cli("main.py", cwd=tmp_path)
    assert run.returncode == plain.returncode == 0, run.stderr
    assert run.stdout == plain.stdout
    assert run.stdout.count("forward") == 301
    assert "caught: mat1 and mat2 shapes cannot be multiplied (8x3 and 4x2)" in run.stdout
    assert run.trace is not None
    assert [f["kind"] for f in run.trace["findings"] if f["severity"] == "error"] == []
    assert run.line(main, line_of(main, "return head")) is not None


async def test_the_editor_shows_a_late_failure_where_the_size_was_written(
    lsp: LspSession,
) -> None:
    """Run from the editor: the diagnostic of the 126th batch's failure is on the model's
    line, names what fc1 was given, and points at the loader's batch and the `view`."""
    model, model_uri = lsp.write("model.py", MODEL)
    train, train_uri = lsp.write("train.py", TRAIN)
    lsp.open(train)
    result = await lsp.run(train_uri)
    assert result["status"] == "exception"
    [diagnostic] = [d for d in lsp.client.diagnostics[model_uri] if d.code == "shape_mismatch"]
    assert diagnostic.range.start.line == line_of(model, "hidden =") - 1
    assert "`self.fc1` (Linear) failed" in diagnostic.message
    assert "`flat` (16, 392) float32 cpu" in diagnostic.message
    related = {
        (Path(r.location.uri).name, r.location.range.start.line)
        for r in diagnostic.related_information or []
    }
    assert ("train.py", line_of(train, "for step, (images") - 1) in related
    assert ("model.py", line_of(model, "flat =") - 1) in related
