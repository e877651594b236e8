"""Will it fit? A shape-only run's memory and FLOPs: per line, the run's peak per device with
its breakdown, an ``out_of_memory`` finding on a budget; storages, not views."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types

from conftest import LspSession, line_of, need, run_cli

torch = need("torch")

TRAIN = """
import torch
import torch.nn as nn

def make_model():
    return nn.Sequential(nn.Linear(512, 1024), nn.ReLU(), nn.Linear(1024, 10)).cuda()

model = make_model()
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
x = torch.randn(64, 512, device="cuda")
flat = x.view(-1)
y = torch.randint(0, 10, (64,), device="cuda")
for step in range(2):
    logits = model(x)
    loss = nn.functional.cross_entropy(logits, y)
    loss.backward()
    opt.step()
    opt.zero_grad()
"""
PARAMETERS = (512 * 1024 + 1024 + 1024 * 10 + 10) * 4


def _memory(run: Any) -> dict[str, Any]:
    assert run.returncode == 0, run.stderr
    memory: dict[str, Any] = run.trace["memory"]
    return memory


def _line(memory: dict[str, Any], path: Path, marker: str) -> dict[str, Any]:
    number = line_of(path, marker)
    [cost] = [c for c in memory["lines"] if c["line"] == number and c["file"] == str(path)]
    return cost


def _reference_flops(train_step: Any) -> int:
    """FLOPs of one real training step on the CPU, counted by torch's FlopCounterMode."""
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as counter:
        train_step()
    return int(counter.get_total_flops())


def test_the_peak_its_breakdown_and_each_line(script, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    main = script(TRAIN)
    memory = _memory(run_cli("--fake", "main.py", cwd=tmp_path))
    [gpu] = [d for d in memory["devices"] if d["device"] == "cuda:0"]
    # the peak is in the optimizer's step, with AdamW's two moments for every parameter
    assert gpu["line"] == line_of(main, "opt.step()")
    breakdown = gpu["breakdown"]
    assert breakdown["parameters"] == PARAMETERS
    assert breakdown["gradients"] == PARAMETERS
    assert breakdown["optimizer state"] == 2 * PARAMETERS
    assert gpu["peak_bytes"] == sum(breakdown.values())
    # a view is free; a new tensor costs its storage
    assert _line(memory, main, "flat =")["born_bytes"] == 0
    assert _line(memory, main, "x = torch.randn")["born_bytes"] == 64 * 512 * 4
    assert _line(memory, main, "y = torch.randint")["born_bytes"] == 64 * 8
    # the backward makes the gradients (its peak is above what stays live after it)
    backward = _line(memory, main, "loss.backward()")
    assert backward["born_bytes"] >= PARAMETERS
    # FLOPs as FlopCounterMode counts a real step of the same model
    model = torch.nn.Sequential(
        torch.nn.Linear(512, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 10)
    )
    x, y = torch.randn(64, 512), torch.randint(0, 10, (64,))
    forward = _reference_flops(lambda: model(x))
    assert _line(memory, main, "logits = model(x)")["flops"] == forward
    loss = torch.nn.functional.cross_entropy(model(x), y)
    assert backward["flops"] == _reference_flops(loss.backward)
    assert memory["flops"] == 2 * (forward + backward["flops"])  # two steps


def test_out_of_memory_is_a_finding_and_the_run_goes_on(script, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    main = script(TRAIN)
    run = run_cli("--fake", "--gpu-memory", "8MiB", "main.py", cwd=tmp_path)
    memory = _memory(run)
    [finding] = run.findings("out_of_memory")
    # parameters, gradients and the first moments fit; the second moment does not
    assert finding["line"] == line_of(main, "opt.step()")
    assert finding["memory"]["budget_bytes"] == 8 * 2**20
    assert finding["memory"]["live_bytes"] > 8 * 2**20
    assert finding["memory"]["breakdown"]["parameters"] == PARAMETERS
    assert "cuda:0 would run out here" in finding["message"]
    assert memory["budget_bytes"] == 8 * 2**20
    assert run.trace["status"] == "ok"  # the run went on to the end
    listing = run.stdout + run.stderr  # the listing goes to stderr when --json writes the trace
    assert "of the 8.0 MiB budget" in listing
    assert "memory: peak 12.3 MiB on cuda:0 at main.py:" in listing
    # a card by name, and what is not one
    named = run_cli("--fake", "--gpu", "a100-80gb", "main.py", cwd=tmp_path)
    assert _memory(named)["budget_bytes"] == 80 * 10**9 and not named.findings("out_of_memory")
    bad = run_cli("--fake", "--gpu-memory", "lots", "main.py", cwd=tmp_path)
    assert bad.returncode == 2 and "'lots' is not a size" in bad.stderr


@pytest.mark.parametrize("size", ["12GB", "12 GiB", "0.5TiB"])
def test_sizes_read_as_people_write_them(size: str) -> None:
    from shapelens.settings.gpu_budget import parse_size

    expected = {"12GB": 12 * 10**9, "12 GiB": 12 * 2**30, "0.5TiB": 2**39}[size]
    assert parse_size(size) == expected


async def test_the_hover_shows_a_lines_memory_and_flops(lsp: LspSession) -> None:
    path, uri = lsp.write("main.py", TRAIN)
    lsp.open(path)
    result = await lsp.run(uri, fake=True)
    assert result["status"] == "ok", result
    # what the status bar shows, and its tooltip
    assert result["memory"]["peak"] == "peak 12.3 MiB"
    assert result["memory"]["text"].startswith("memory: peak 12.3 MiB on cuda:0 at main.py:")
    line = line_of(path, "logits = model(x)") - 1
    hover = await lsp.client.text_document_hover_async(
        types.HoverParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            position=types.Position(line=line, character=5),
        )
    )
    assert hover is not None and isinstance(hover.contents, types.MarkupContent)
    # two Linear outputs kept for the backward (256 KiB each) and the logits (2.5 KiB);
    # 2·64·512·1024 + 2·64·1024·10 FLOPs
    assert "**memory** born 514.5 KiB, live after" in hover.contents.value
    assert "on cuda:0, 68.4 MFLOP" in hover.contents.value
    # the editor's module view: each module's summary
    tree = await lsp.client.workspace_execute_command_async(
        types.ExecuteCommandParams(command="shapelens.modules", arguments=[{"uri": uri}])
    )
    root = next(m for m in tree["modules"] if m["path"] == "")
    assert root["summary"].endswith("×2 · 514.5 KiB activations · 68.4 MFLOP"), root["summary"]


def test_each_module_s_activations_and_flops_and_the_totals(script, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # a pause longer than a flush interval before `opt.zero_grad()`: the tree is sent while
    # the gradients live, and must be sent again once they are gone
    script(
        TRAIN.replace("import torch\n", "import time\nimport torch\n", 1).replace(
            "    opt.zero_grad()", "    time.sleep(0.6)\n    opt.zero_grad()"
        )
    )
    run = run_cli("--fake", "--modules", "main.py", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    costs = {m["path"]: m["cost"] for m in run.trace["modules"]}
    assert costs[""] == {
        "param_bytes": PARAMETERS,
        "activation_bytes": 2 * 64 * 1024 * 4 + 64 * 10 * 4,  # kept for the backward
        "flops": 2 * 64 * 512 * 1024 + 2 * 64 * 1024 * 10,
        # the weights' gradients, and the last Linear's input's (x needs none)
        "backward_flops": 2 * 64 * 512 * 1024 + 2 * 2 * 64 * 1024 * 10,
        "grad_bytes": 0,  # opt.zero_grad() last: set to None
        # AdamW's two moments of every parameter, and its 4-byte step count of each
        "optimizer_state_bytes": 2 * PARAMETERS + 4 * 4,
    }
    assert costs["0"]["optimizer_state_bytes"] == 2 * (512 * 1024 + 1024) * 4 + 2 * 4
    assert costs["0"]["flops"] == 2 * 64 * 512 * 1024  # a child's figures, its own
    assert costs["1"]["flops"] == 0 and costs["1"]["activation_bytes"] == 64 * 1024 * 4
    listing = run.stdout + run.stderr
    assert "activations  forward FLOPs  backward FLOPs" in listing
    assert "  0         Linear      525.3k" in listing
    assert "256.0 KiB    67.1 MFLOP     67.1 MFLOP" in listing
    assert (
        "total: 535.6k params (535.6k trainable), 2.0 MiB of parameters; a forward keeps "
        "514.5 KiB for the backward, 68.4 MFLOP forward, 69.7 MFLOP backward; gradients 0 B, "
        "optimizer state 4.1 MiB"
    ) in listing


LSTM = """
import torch

lstm = torch.nn.LSTM(5, 7, num_layers=2)
x = torch.randn(10, 3, 5)
out, _ = lstm(x)
"""


def _storages_born(run: Any) -> tuple[int, int]:
    """(bytes of the new storages ``run()`` makes on the CPU, of which oneDNN's LSTM
    workspaces), counted on real tensors."""
    from torch.utils._python_dispatch import TorchDispatchMode

    kept: dict[int, Any] = {}  # held, so no storage's address is reused meanwhile
    workspace = 0

    class Born(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            nonlocal workspace
            out = func(*args, **(kwargs or {}))
            outputs = out if isinstance(out, (tuple, list)) else (out,)
            for tensor in outputs:
                if isinstance(tensor, torch.Tensor):
                    kept.setdefault(tensor.untyped_storage()._cdata, tensor.untyped_storage())
            if func is torch.ops.aten.mkldnn_rnn_layer.default:
                workspace += outputs[3].untyped_storage().nbytes()
            return out

    with Born():
        run()
    return sum(s.nbytes() for s in kept.values()), workspace


def test_an_lstm_counts_the_workspace_onednn_keeps_for_its_backward(script, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # the fake kernel of oneDNN's LSTM layer returns an empty workspace; the CPU's holds one
    # for the backward: a shape-only run counts the CPU kernel's own
    main = script(LSTM)
    memory = _memory(run_cli("--fake", "main.py", cwd=tmp_path))
    lstm, x = torch.nn.LSTM(5, 7, num_layers=2), torch.randn(10, 3, 5)
    born, workspace = _storages_born(lambda: lstm(x))
    assert workspace > 0
    assert _line(memory, main, "out, _ = lstm(x)")["born_bytes"] == born


BACKWARD = """
import time
import torch
import torch.nn as nn

model = nn.Sequential(nn.Linear(2048, 2048), nn.ReLU(), nn.Linear(2048, 4))
x = torch.randn(64, 2048)
loss = model(x).square().mean()
time.sleep(0.6)  # the module tree is sent before the backward: it must be sent again
loss.backward()
"""


def test_the_peak_names_the_module_whose_backward_made_it(script, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # the first Linear's 16 MiB weight gradient is born in its backward, with the weights and
    # the activations still live: the peak
    main = script(BACKWARD)
    run = run_cli("--fake", "--modules", "main.py", cwd=tmp_path)
    [cpu] = _memory(run)["devices"]
    assert (cpu["module"], cpu["module_class"], cpu["phase"]) == ("0", "Linear", "backward")
    listing = run.stdout + run.stderr
    where = f"at main.py:{line_of(main, 'loss.backward()')}, in the backward of 0 (Linear)"
    assert f"memory: peak 33.1 MiB on cpu {where} (parameters 16.0 MiB, gradients 16.0" in listing
    # each module's backward FLOPs as FlopCounterMode counts them in a real step (it tracks
    # modules too: what its forward counted, then what the backward added)
    from torch.utils.flop_counter import FlopCounterMode

    model = torch.nn.Sequential(
        torch.nn.Linear(2048, 2048), torch.nn.ReLU(), torch.nn.Linear(2048, 4)
    )
    with FlopCounterMode(display=False) as counter:
        loss = model(torch.randn(64, 2048)).square().mean()
        forward = {k: sum(v.values()) for k, v in counter.get_flop_counts().items()}
        loss.backward()
        both = {k: sum(v.values()) for k, v in counter.get_flop_counts().items()}
    costs = {m["path"]: m["cost"] for m in run.trace["modules"]}
    for path, name in (("", "Sequential"), ("0", "Sequential.0"), ("2", "Sequential.2")):
        assert costs[path]["flops"] == forward[name]
        assert costs[path]["backward_flops"] == both[name] - forward[name], path
    assert costs["0"]["backward_flops"] == 2 * 64 * 2048 * 2048  # no gradient for x
    assert "activations  forward FLOPs  backward FLOPs" in listing


def test_a_statement_holds_no_intermediate_its_modules_let_go(script, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Six Linear+ReLU layers under no_grad: each activation dies once the next layer has
    read it, so the line's peak holds the input and two or three activations (a real CPU
    run counted the same way: three), not every layer's (the op watch once held each
    layer's returned frame, and its locals, to the end of the statement: thirteen)."""
    main = script(
        """
        import torch
        import torch.nn as nn

        layers = []
        for _ in range(6):
            layers += [nn.Linear(512, 512), nn.ReLU()]
        net = nn.Sequential(*layers).cuda()
        x = torch.randn(128, 512, device="cuda")
        with torch.no_grad():
            out = net(x)
        """
    )
    memory = _memory(run_cli("--fake", "main.py", cwd=tmp_path))
    line = _line(memory, main, "out = net(x)")
    parameters = 6 * (512 * 512 + 512) * 4
    activation = 128 * 512 * 4
    assert line["born_bytes"] == 12 * activation  # every storage the line made
    assert parameters + 3 * activation <= line["peak_bytes"] <= parameters + 4 * activation


REAL = (
    TRAIN.replace(".cuda()", "")
    .replace(', device="cuda"', "")
    .replace("    opt.zero_grad()\n", "    opt.zero_grad()\nmodel(x).sum().backward()\n")
)
"""TRAIN on the CPU, real tensors, with gradients left at the end."""


def test_a_real_run_counts_its_memory_when_asked(script, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    main = script(REAL)
    run = run_cli("--memory", "--modules", "main.py", cwd=tmp_path)
    memory = _memory(run)
    assert run.trace.get("shape_only") is None  # real tensors
    [cpu] = memory["devices"]
    assert (cpu["device"], cpu["line"]) == ("cpu", line_of(main, "opt.step()"))
    breakdown = cpu["breakdown"]
    assert breakdown["parameters"] == breakdown["gradients"] == PARAMETERS
    # AdamW's two moments, and its step count per parameter (a CPU scalar: a shape-only
    # run has it on the CPU, beside the simulated GPU's peak)
    assert breakdown["optimizer state"] == 2 * PARAMETERS + 4 * 4
    assert cpu["peak_bytes"] == sum(breakdown.values())
    assert _line(memory, main, "flat =")["born_bytes"] == 0  # a view is free
    assert _line(memory, main, "x = torch.randn")["born_bytes"] == 64 * 512 * 4
    model = torch.nn.Sequential(
        torch.nn.Linear(512, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 10)
    )
    x, y = torch.randn(64, 512), torch.randint(0, 10, (64,))
    forward = _reference_flops(lambda: model(x))
    loss = torch.nn.functional.cross_entropy(model(x), y)
    backward = _reference_flops(loss.backward)
    assert _line(memory, main, "logits = model(x)")["flops"] == forward
    assert _line(memory, main, "loss.backward()")["flops"] == backward
    assert memory["flops"] == 3 * (forward + backward)  # two steps, the backward after
    root = {m["path"]: m["cost"] for m in run.trace["modules"]}[""]
    assert root["flops"] == forward
    assert root["optimizer_state_bytes"] == 2 * PARAMETERS + 4 * 4  # per module, as above
    assert root["grad_bytes"] == PARAMETERS  # the last backward's, left after the loop
    listing = run.stdout + run.stderr
    assert f"memory: peak 12.3 MiB on cpu at main.py:{line_of(main, 'opt.step()')}" in listing
    assert "compute: 414.4 MFLOP in all" in listing
    # not asked: no dispatch mode, no memory section
    plain = run_cli("main.py", cwd=tmp_path)
    assert plain.returncode == 0 and plain.trace.get("memory") is None
    assert "memory: peak" not in plain.stdout + plain.stderr


def test_a_real_run_counts_the_program_s_memory_not_shapelens_s(script, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The NaN scan's reduction and a failed call's trials on meta tensors are ShapeLens's
    work: neither is counted, neither stands aside for the memory watch, and the traceback
    has none of the watch's frames."""
    main = script(
        """
        import torch
        a = torch.zeros(3)
        b = a / a
        c = b + 1
        d = torch.randn(5, 6)
        e = a @ d
        """
    )
    run = run_cli("--memory", "main.py", cwd=tmp_path)
    memory = run.trace["memory"]
    assert [d["device"] for d in memory["devices"]] == ["cpu"]  # no trial's meta tensors
    assert _line(memory, main, "c = b + 1")["born_bytes"] == 12  # not the scan's sum of b
    assert run.findings("nonfinite") and run.findings("shape_mismatch")
    traceback = run.stderr.split("RuntimeError: mat1 and mat2 shapes")[0]
    assert traceback.count('File "') == 1, traceback  # the user's line alone
    # torch's frames the program itself went through stay, as Python prints them
    script("import torch\nfc = torch.nn.Linear(4, 2)\ny = fc(torch.randn(3, 5))\n", "layer.py")
    failed = run_cli("--memory", "layer.py", cwd=tmp_path).stderr
    files = [line.split('"')[1] for line in failed.splitlines() if line.startswith('  File "')]
    assert Path(files[0]).name == "layer.py" and files[-1].endswith("linear.py")


async def test_the_editor_setting_counts_a_real_run_s_memory(lsp: LspSession) -> None:
    path, uri = lsp.write("main.py", REAL)
    lsp.open(path)
    lsp.client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(settings={"shapelens": {"memory": True}})
    )
    result = await lsp.run(uri)
    assert result["status"] == "ok", result
    assert result["memory"]["peak"] == "peak 12.3 MiB"  # the status bar
    assert result["memory"]["text"].startswith("memory: peak 12.3 MiB on cpu at main.py:")
    hover = await lsp.client.text_document_hover_async(
        types.HoverParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            position=types.Position(line=line_of(path, "logits = model(x)") - 1, character=5),
        )
    )
    assert hover is not None and isinstance(hover.contents, types.MarkupContent)
    assert "**memory** born 514.5 KiB, live after" in hover.contents.value
    assert "on cpu, 68.4 MFLOP" in hover.contents.value


DICT_OUTPUTS = """
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


@dataclass
class Output:
    logits: torch.Tensor
    hidden: torch.Tensor


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(32, 64)
        self.b = nn.Linear(64, 64)

    def forward(self, x):
        h = torch.relu(self.a(x))
        return {"hidden": self.b(h), "pre": h}  # h's gradient comes after b's backward


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = Encoder()
        self.head = nn.Linear(64, 10)

    def forward(self, x):
        out = self.enc(x)
        return Output(logits=self.head(out["hidden"]), hidden=out["hidden"])


model = Model().cuda()
x = torch.randn(8, 32, device="cuda")
out = model(x)
loss = F.cross_entropy(out.logits, torch.zeros(8, dtype=torch.long, device="cuda"))
loss.backward()
"""
"""Modules that return a dict and a dataclass: their backward runs from the first of their
outputs' gradients (``logits``') to the last of their inputs'."""


def _flop_counter_counts() -> dict[str, int]:
    """FlopCounterMode's count per module (forward and backward) for the same model on the
    CPU, in this process: right for modules that return tensors; for a dict it starts the
    backward at the last output's gradient, and a dataclass it does not open."""
    from torch.utils.flop_counter import FlopCounterMode

    scope: dict[str, Any] = {}
    exec(DICT_OUTPUTS.split("model = Model()")[0], scope)
    model = scope["Model"]()
    with FlopCounterMode(display=False) as counter:
        out = model(torch.randn(8, 32))
        torch.nn.functional.cross_entropy(out.logits, torch.zeros(8, dtype=torch.long)).backward()
    return {name: sum(ops.values()) for name, ops in counter.get_flop_counts().items()}


def test_modules_that_return_dicts_and_dataclasses_count_their_backward(
    script, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    script(DICT_OUTPUTS)
    run = run_cli("--quiet", "--fake", "main.py", cwd=tmp_path, timeout=60)
    assert run.returncode == 0, run.stderr
    costs = {m["path"]: m["cost"] for m in run.trace["modules"]}
    expected = _flop_counter_counts()
    for path in ("enc.a", "enc.b", "head"):  # tensors in, tensors out: as FlopCounterMode
        cost = costs[path]
        assert cost["flops"] + cost["backward_flops"] == expected[f"Model.{path}"], path
        assert cost["backward_flops"] > 0
    # A module's backward holds its children's (no op of their own has a FLOP formula).
    assert costs["enc"]["backward_flops"] == sum(
        costs[p]["backward_flops"] for p in ("enc.a", "enc.b")
    )
    children = ("enc.a", "enc.b", "head")
    assert costs[""]["backward_flops"] == sum(costs[p]["backward_flops"] for p in children)
    assert costs[""]["flops"] + costs[""]["backward_flops"] == expected["Global"]


async def test_the_module_view_shows_a_dict_module_s_backward(lsp: LspSession) -> None:
    path, uri = lsp.write("main.py", DICT_OUTPUTS)
    lsp.open(path)
    assert (await lsp.run(uri, fake=True))["status"] == "ok"
    tree = await lsp.client.workspace_execute_command_async(
        types.ExecuteCommandParams(command="shapelens.modules", arguments=[{"uri": uri}])
    )
    costs = {m["path"]: m["cost"] for m in tree["modules"]}
    assert costs["enc"]["backward_flops"] == 2 * 8 * 32 * 64 + 2 * 2 * 8 * 64 * 64
    assert costs[""]["backward_flops"] == costs["enc"]["backward_flops"] + 2 * 2 * 8 * 64 * 10
