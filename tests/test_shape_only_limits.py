"""What a shape-only run cannot simulate ends it cleanly: an op with no fake kernel (a custom
op without ``register_fake``, an operator a C extension or ``torch.library`` defines for the
CPU only, a sparse layout's op on torch 2.4) stops the run with its own status at the
user's line, names the op, keeps what was traced, and is no error of the program."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from conftest import CHILD_PYTHON, line_of, need, run_cli

torch = need("torch")

PROGRAMS = {
    "custom_op": (
        """
        import torch

        @torch.library.custom_op("shapelens_test::scale_rows", mutates_args=())
        def scale_rows(x: torch.Tensor, factor: float) -> torch.Tensor:
            return x * factor

        print("start")
        x = torch.randn(4, 8)
        hidden = torch.nn.Linear(8, 16)(x)
        y = scale_rows(hidden, 2.0)
        print(y.shape)
        """,
        "y = scale_rows(",
        "shapelens_test::scale_rows",
    ),
    "library_op": (
        """
        import torch

        lib = torch.library.Library("shapelens_test", "DEF")
        lib.define("shift(Tensor x) -> Tensor")
        lib.impl("shift", lambda x: x + 1, "CPU")

        print("start")
        x = torch.randn(4, 8)
        hidden = torch.nn.Linear(8, 16)(x)
        y = torch.ops.shapelens_test.shift(hidden)
        print(y.shape)
        """,
        "y = torch.ops.shapelens_test.shift(",
        "shapelens_test::shift",
    ),
}


@pytest.mark.parametrize("kind", sorted(PROGRAMS))
def test_an_op_without_a_fake_kernel_is_a_clean_stop(script, tmp_path: Path, kind: str) -> None:  # type: ignore[no-untyped-def]
    source, statement, op = PROGRAMS[kind]
    main = script(source)
    plain = subprocess.run(
        [CHILD_PYTHON or sys.executable, "main.py"], cwd=tmp_path, capture_output=True, text=True
    )
    assert plain.returncode == 0, plain.stderr  # a real run has the kernel
    run = run_cli("--quiet", "--fake", "main.py", cwd=tmp_path, timeout=60)
    assert run.returncode == 0, run.stderr
    assert run.stdout == "start\n"
    assert run.trace is not None and run.trace["status"] == "shape_only_stop"
    stop = run.trace["exception"]
    assert stop["line"] == line_of(main, statement)
    assert stop["message"].startswith(f"`{op}` cannot be simulated: it has no fake kernel")
    assert not [f for f in run.trace["findings"] if f["severity"] == "error"]
    # One line of ours, no traceback, no dispatcher dump.
    assert "Traceback" not in run.stderr and "registered at" not in run.stderr
    assert len(run.stderr.encode()) - len(plain.stderr.encode()) < 2048, run.stderr
    assert f"stopped at main.py:{stop['line']}: `{op}` cannot be simulated" in run.stderr
    # What ran before it is kept.
    assert run.var(main, line_of(main, "hidden = "), "hidden")["shape"] == [4, 16]


async def test_the_editor_says_where_it_stopped_and_why(lsp) -> None:  # type: ignore[no-untyped-def]
    from lsprotocol import types

    source, statement, op = PROGRAMS["custom_op"]
    path, uri = lsp.write("main.py", source)
    lsp.open(path)
    summary = await lsp.run(uri, fake=True)
    assert summary["status"] == "shape_only_stop" and summary["shapeOnly"] is True
    diagnostics = lsp.client.diagnostics.get(uri, [])
    [stop] = [d for d in diagnostics if d.code == "shape_only_stop"]
    assert stop.severity == types.DiagnosticSeverity.Information
    assert stop.range.start.line == line_of(path, statement) - 1
    assert stop.message.startswith(f"shape-only run stopped here: `{op}` cannot be simulated")
    assert not [d for d in diagnostics if d.severity == types.DiagnosticSeverity.Error]
    hints = await lsp.hints(uri)
    assert hints[line_of(path, "hidden = ") - 1] == "hidden (4,16) grad  [fake]"


def test_a_sparse_layout_runs_on_or_stops_cleanly(script, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Newer torch has fake kernels for sparse layouts and the run goes on; torch 2.4 has
    none for ``_to_sparse_csr`` and raised a dispatcher dump of every kernel (8 KB): now a
    stop that names the op (the compatibility stage runs this on 2.4)."""
    main = script(
        """
        import torch
        x = torch.randn(4, 8)
        s = x.to_sparse()
        d = torch.sparse.sum(s, dim=1)
        c = s.to_sparse_csr()
        print(tuple(c.shape))
        """
    )
    run = run_cli("--quiet", "--fake", "main.py", cwd=tmp_path, timeout=60)
    assert run.returncode == 0, run.stderr
    assert "Traceback" not in run.stderr and "registered at" not in run.stderr
    assert run.trace is not None and run.trace["status"] in ("ok", "shape_only_stop")
    if run.trace["status"] == "shape_only_stop":
        assert run.trace["exception"]["line"] == line_of(main, "c = s.to_sparse_csr()")
        assert run.trace["exception"]["message"].startswith("`aten::_to_sparse_csr` cannot be")
    else:
        assert run.stdout == "(4, 8)\n"
    assert run.var(main, line_of(main, "d = "), "d")["shape"] == [4]


TIED_LM = """
import torch
import torch.nn.functional as F
from torch import nn


class TinyLM(nn.Module):
    def __init__(self, vocab=1000, width=64):
        super().__init__()
        self.emb = nn.Embedding(vocab, width)
        self.block = nn.Linear(width, width)
        self.head = nn.Linear(width, vocab, bias=False)
        self.head.weight = self.emb.weight  # tied, as GPT-2's head to its embedding

    def forward(self, idx):
        return self.head(torch.relu(self.block(self.emb(idx))))


device = "cuda" if torch.cuda.is_available() else "cpu"
model = TinyLM().to(device).half().to(device, torch.bfloat16)
model.cuda() if device == "cuda" else model.cpu()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
idx = torch.randint(0, 1000, (4, 16), device=device)
logits = model(idx)
loss = F.cross_entropy(logits.float().view(-1, 1000), idx.view(-1))
loss.backward()
optimizer.step()
print(model.head.weight is model.emb.weight, sum(p.numel() for p in model.parameters()))
"""
"""A head tied to its embedding, moved and cast the ways people write it: one Parameter
(64,000 of the 68,160) in a real run, however often the model is converted."""


def test_tied_weights_stay_tied_across_conversions(script, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A shape-only run on the simulated GPU counts what a real run on the CPU counts: the
    parameters (the tree's count and bytes), the optimizer's state and the peak."""
    script(TIED_LM)
    fake = run_cli("--quiet", "--fake", "main.py", cwd=tmp_path, timeout=60)
    real = run_cli("--quiet", "--memory", "main.py", cwd=tmp_path, timeout=60)
    assert fake.returncode == real.returncode == 0, fake.stderr + real.stderr
    assert fake.stdout == real.stdout == "True 68160\n"
    assert fake.trace is not None and real.trace is not None
    [fake_root] = [m for m in fake.trace["modules"] if m["path"] == ""]
    [real_root] = [m for m in real.trace["modules"] if m["path"] == ""]
    assert fake_root["params"] == real_root["params"] == 68160
    assert fake_root["cost"] == real_root["cost"]  # param, grad, optimizer state bytes
    assert fake_root["cost"]["param_bytes"] == 68160 * 2  # bf16
    peaks = {d["device"]: d["peak_bytes"] for d in fake.trace["memory"]["devices"]}
    [real_peak] = [d["peak_bytes"] for d in real.trace["memory"]["devices"]]
    assert peaks["cuda:0"] == real_peak


async def test_the_editor_counts_a_tied_weight_once(lsp) -> None:  # type: ignore[no-untyped-def]
    from lsprotocol import types

    path, uri = lsp.write("main.py", TIED_LM)
    lsp.open(path)
    assert (await lsp.run(uri, fake=True))["status"] == "ok"
    answer = await lsp.client.workspace_execute_command_async(
        types.ExecuteCommandParams(command="shapelens.modules", arguments=[{"uri": uri}])
    )
    [root] = [m for m in answer["modules"] if m["path"] == ""]
    assert root["summary"].startswith("68.2k params · (4,16) → (4,16,1000) ×1"), root
