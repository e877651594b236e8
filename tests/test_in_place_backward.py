"""A backward that needs a tensor an in-place op changed after the op that made it saved it
("modified by an inplace operation ... which is output 0 of Sigmoid"): the finding names
that tensor, where it was made and the line that changed it, not the loss's history."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import CHILD_PYTHON, line_of, need, run_cli

need("torch")
pytestmark = pytest.mark.backend  # the op watch's calls are what it reads

MODEL = """
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(20, 64)
        self.fc2 = nn.Linear(64, 10)

    def forward(self, x):
        h = self.fc1(x)
        h.relu_()  # in place on a Linear's output: its backward does not need it
        g = torch.sigmoid(h)
        {change}
        return self.fc2(g)
"""

TRAIN = """
import argparse

import torch
from torch.utils.data import DataLoader, TensorDataset

from model import Net

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=2)
args = parser.parse_args()

torch.manual_seed(0)
data = TensorDataset(torch.randn(96, 20), torch.randint(0, 10, (96,)))
loader = DataLoader(data, batch_size=32, shuffle=True)
model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
loss_fn = torch.nn.CrossEntropyLoss()
for epoch in range(args.epochs):
    for xb, yb in loader:
        loss = loss_fn(model(xb), yb)
        opt.zero_grad()
        loss.backward()
        opt.step()
    print(f"epoch {epoch} loss {loss.item():.3f}")
"""


def _the_error_as_under_python(name: str, cwd: Path) -> dict[str, Any]:
    """Run ``name`` under python and traced: the same output and exit 1; the one error."""
    plain = subprocess.run(
        [CHILD_PYTHON or sys.executable, name],
        cwd=cwd, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    run = run_cli("--quiet", name, cwd=cwd)
    assert (run.returncode, run.stdout, run.stderr) == (1, plain.stdout, plain.stderr)
    [finding] = [f for f in run.trace["findings"] if f["severity"] == "error"]
    return finding  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    ("change", "op"),
    [("g += 0.1", "Tensor.add_"), ("g[:, 0] = 0.0", "Tensor.__setitem__")],
)
def test_a_saved_output_changed_in_place_is_named_with_the_line_that_changed_it(
    script,  # type: ignore[no-untyped-def]
    tmp_path: Path,
    change: str,
    op: str,
) -> None:
    model = script(MODEL.replace("{change}", change), "model.py")
    train = script(TRAIN, "train.py")
    finding = _the_error_as_under_python("train.py", tmp_path)
    assert (finding["kind"], finding["line"]) == ("op_error", line_of(train, "loss.backward()"))
    assert finding["op"] == "Tensor.backward"
    [operand] = finding["operands"]
    assert (operand["name"], operand["shape"], operand["line"]) == (
        "g",
        [32, 64],
        line_of(model, "g = torch.sigmoid(h)"),
    )
    [step] = finding["chain"]
    assert (step["file"], step["line"]) == (str(model), line_of(model, change))
    assert step["note"].startswith(f"changed in place by `{change}` ({op})")
    assert "torch.sigmoid saved `g` for its backward" in finding["advice"]


def test_a_change_made_out_of_place_trains_clean(
    script,  # type: ignore[no-untyped-def]
    tmp_path: Path,
) -> None:
    """``g = g + 0.1`` (and the Linear's output changed in place, which autograd allows):
    the run ends clean, with no finding."""
    script(MODEL.replace("{change}", "g = g + 0.1"), "model.py")
    script(TRAIN, "train.py")
    run = run_cli("--quiet", "train.py", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert run.stdout.count("epoch") == 2
    assert run.trace["findings"] == []


GAN = """
import argparse

import torch
from torch import nn


def train(steps):
    torch.manual_seed(0)
    gen = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    disc = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 1))
    opt_g = torch.optim.Adam(gen.parameters(), lr=1e-3)
    opt_d = torch.optim.Adam(disc.parameters(), lr=1e-3)
    bce = nn.BCEWithLogitsLoss()
    real = torch.randn(32, 4)
    for step in range(steps):
        fake = gen(torch.randn(32, 8))
        d_loss = bce(disc(real), torch.ones(32, 1)) + bce(disc(fake), torch.zeros(32, 1))
        g_loss = bce(disc(fake), torch.ones(32, 1))
        opt_d.zero_grad()
        d_loss.backward(retain_graph=True)
        opt_d.step()
        opt_g.zero_grad()
        g_loss.backward()
        opt_g.step()
        print(step, round(g_loss.item(), 3))


parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=3)
train(parser.parse_args().steps)
"""


def test_a_weight_an_optimizer_stepped_before_the_backward_is_named_with_the_step(
    script,  # type: ignore[no-untyped-def]
    tmp_path: Path,
) -> None:
    """A GAN's classic: the generator's loss is made before the discriminator's step and run
    backward after it, which changed the discriminator's weights in place. torch names a
    (16, 1) view "output 0 of AsStrided": the finding names the weight, `disc.2.weight`, and
    the `opt_d.step()` line that changed it."""
    main = script(GAN, "gan.py")
    finding = _the_error_as_under_python("gan.py", tmp_path)
    assert (finding["kind"], finding["line"]) == ("op_error", line_of(main, "g_loss.backward()"))
    [operand] = finding["operands"]
    assert (operand["name"], operand["shape"]) == ("disc.2.weight", [1, 16])
    [step] = finding["chain"]
    assert step["line"] == line_of(main, "opt_d.step()")
    assert step["note"].startswith("changed in place by `opt_d.step()`")
    assert "run the backward before `opt_d.step()`" in finding["advice"]
