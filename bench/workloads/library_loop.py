"""Benchmark workload: the MLP's 400 SGD steps run by a library's loop, code the tracer does
not follow, under one statement of the user's (as ``trainer.train()`` runs one): the loop
is written to a folder outside the project and imported from there."""

from __future__ import annotations

import importlib
import shutil
import sys
import tempfile
import textwrap
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from harness import measure, scaled
from models import mlp

STEPS = scaled(400)
LIBRARY = textwrap.dedent(
    """
    import torch


    def fit(model, x, y, optimizer, steps):
        loss_fn = torch.nn.MSELoss()
        loss = torch.zeros(())
        for _ in range(steps):
            optimizer.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            optimizer.step()
        return loss.item()
    """
)


if __name__ == "__main__":
    folder = tempfile.mkdtemp(prefix="shapelens-bench-library-")  # outside the project
    try:
        (Path(folder) / "trainer_library.py").write_text(LIBRARY)
        sys.path.insert(0, folder)
        fit = importlib.import_module("trainer_library").fit
        torch.manual_seed(0)
        model, x, y = mlp(torch)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
        measure("library_loop", fit, model, x, y, optimizer, STEPS)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
