"""The model as it ran: every nn.Module call, with its path, parameters, shapes, calls and
where it was declared, through the CLI and the language server."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from shapelens.engine.modules.tree import ModuleTree
from shapelens.engine.recording.scope import ScopeConfig, UserCodeScope
from shapelens.engine.session import engine_for
from shapelens.engine.source.source_map import SourceMaps
from shapelens.present.modules import count_text
from shapelens.trace import trace_from_json
from shapelens.trace.codec import SCHEMA_PATH

from conftest import line_of, need, run_cli

pytestmark = pytest.mark.backend
BACKENDS = ["monitoring"] if sys.version_info >= (3, 12) else ["settrace"]
"""The backend `make test` runs the whole suite with on this interpreter: sys.settrace (and
its gate, which records the module tree as plain sys.settrace does: test_library_gate) on
3.11, sys.monitoring on 3.12+. Plain sys.settrace on 3.12+ would repeat 3.11's runs."""

HERE = str(Path(__file__).parent)

BLOCK = """
class Block(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.proj = nn.Linear(width, width)

    def forward(self, x):
        return x + self.proj(self.norm(x))
"""

MODEL = (
    """
import torch
import torch.nn as nn

"""
    + BLOCK
    + """

class Net(nn.Module):
    def __init__(self, vocab, width, depth):
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.blocks = nn.ModuleList([Block(width) for _ in range(depth)])
        self.act = nn.GELU()
        self.head = nn.Linear(width, vocab)
        self.head.weight.requires_grad_(False)  # frozen: not trainable

    def forward(self, idx, deep=True):
        x = self.embed(idx)
        for block in self.blocks if deep else self.blocks[:1]:  # dynamic depth
            x = self.act(block(x))  # one GELU reused after every block
        return self.head(x)
"""
)

MAIN = """
import torch
import torch.nn as nn
from model import Net

net = Net(vocab=10, width=8, depth=2)
criterion = nn.CrossEntropyLoss()
wrapped = nn.DataParallel(net)  # on the CPU it just calls the model: shown unwrapped
for step, length in enumerate([5, 3, 7]):
    idx = torch.randint(0, 10, (2, length))
    logits = wrapped(idx, deep=step != 1)
    loss = criterion(logits.view(-1, 10), idx.view(-1))
"""


def test_the_cli_records_and_prints_the_module_tree(script, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    need("torch")
    model = script(MODEL, "model.py")
    script(MAIN)
    run = run_cli("--modules", "main.py", cwd=tmp_path, timeout=180)
    assert run.returncode == 0, run.stderr
    assert run.trace is not None
    jsonschema.validate(run.trace, json.loads(SCHEMA_PATH.read_text()))
    modules = {(m["class"], m["path"]): m for m in run.trace["modules"]}
    order = [(m["class"], m["path"]) for m in run.trace["modules"]]
    # Two roots, each first in its tree; the DataParallel wrapper is shown as what it wraps.
    assert order[0] == ("Net", "") and ("CrossEntropyLoss", "") in order
    assert not any(cls == "DataParallel" or path.startswith("module") for cls, path in order)
    assert order.index(("Block", "blocks.0")) < order.index(("LayerNorm", "blocks.0.norm"))
    net = modules[("Net", "")]
    assert net["calls"] == 3 and net["params"] == 10 * 8 + 2 * (16 + 72) + 90
    assert net["trainable_params"] == net["params"] - 80  # the frozen head's weight
    assert net["inputs"] == [
        {"shape": [2, 7], "dtype": "int64", "device": "cpu", "dim_ranges": [[2, 2], [3, 7]]}
    ]
    assert net["outputs"][0]["dim_ranges"] == [[2, 2], [3, 7], [10, 10]]
    assert net["declared"] is None  # a root
    assert net["forward"] == {"file": str(model), "line": line_of(model, "def forward(self, idx")}
    # Dynamic depth: the second block ran on two of the three calls; the GELU after each.
    assert modules[("Block", "blocks.0")]["calls"] == 3
    assert modules[("Block", "blocks.1")]["calls"] == 2
    assert modules[("GELU", "act")]["calls"] == 5
    # Declared where the user's class holds it: ModuleList's child by `self.blocks = ...`.
    norm = modules[("LayerNorm", "blocks.1.norm")]
    assert norm["declared"] == {"file": str(model), "line": line_of(model, "self.norm =")}
    block = modules[("Block", "blocks.1")]
    assert block["declared"]["line"] == line_of(model, "self.blocks =")
    assert block["forward"]["line"] == line_of(model, "def forward(self, x)")
    assert modules[("Linear", "head")]["forward"]["file"].endswith("torch/nn/modules/linear.py")
    # The table on stderr: tree order, parameters, in → out, calls.
    table = run.stderr[run.stderr.index("\nmodule ") + 1 :]
    rows = [" ".join(row.split()) for row in table.splitlines()]
    assert rows[0] == "module class params in → out calls"
    assert "Net Net 346 (2,3‥7) → (2,3‥7,10) ×3" in rows
    # The second block only ran on the longer sequences; it sits under the root (its
    # ModuleList never ran itself), its children under it.
    assert "blocks.1 Block 88 (2,5‥7,8) → (2,5‥7,8) ×2" in rows
    assert "norm LayerNorm 16 (2,5‥7,8) → (2,5‥7,8) ×2" in rows
    lines = table.splitlines()
    block = next(line for line in lines if line.lstrip().startswith("blocks.1 "))
    norm = lines[lines.index(block) + 1]
    assert len(block) - len(block.lstrip()) == 2 and len(norm) - len(norm.lstrip()) == 4
    # The trace reads back into the model the editor uses.
    assert trace_from_json(run.trace).modules[0].cls == "Net"


WATCHED = """
import sys
import torch
import torch.nn as nn
import torch.nn.modules.module as torch_module


class Picky(nn.Module):
    def forward(self, x):
        if x.shape[0] == 3:
            raise ValueError("no threes")
        return x * 2


picky = Picky()
widen = nn.Linear(4, 6)
widen.register_forward_hook(lambda module, args, out: out[:, :2])  # the user's own hook
for rows in (1, 3, 2):
    try:
        picky(torch.ones(rows, 4))
    except ValueError:
        pass
    narrowed = widen(torch.ones(rows, 4))
print("global hooks:", len(torch_module._global_forward_hooks), file=sys.stderr)
"""


@pytest.mark.parametrize("backend", BACKENDS)
def test_module_calls_are_seen_without_changing_how_torch_calls_them(  # type: ignore[no-untyped-def]
    script, tmp_path: Path, backend: str
) -> None:
    """No global hook of ours sends every module call down torch's slower path; a call that
    raised is not counted, and a user's hook that replaces the result is what came out."""
    need("torch")
    script(WATCHED)
    run = run_cli("--backend", backend, "main.py", cwd=tmp_path, timeout=120)
    assert run.returncode == 0, run.stderr
    assert "global hooks: 0" in run.stderr
    assert run.trace is not None
    modules = {m["class"]: m for m in run.trace["modules"]}
    assert modules["Picky"]["calls"] == 2  # the call with three rows raised
    assert modules["Picky"]["inputs"][0]["dim_ranges"] == [[1, 2], [4, 4]]
    assert modules["Linear"]["calls"] == 3
    assert modules["Linear"]["outputs"][0]["shape"] == [2, 2]  # after the user's hook
    assert modules["Linear"]["outputs"][0]["dim_ranges"] == [[1, 3], [2, 2]]


def test_counts_read_at_a_glance() -> None:
    assert [count_text(n) for n in (3, 4224, 27_680, 1_300_000, 1_234_000_000)] == [
        "3",
        "4.2k",
        "27.7k",
        "1.3M",
        "1.2B",
    ]


async def test_the_language_server_returns_the_tree_and_lenses(lsp) -> None:  # type: ignore[no-untyped-def]
    from lsprotocol import types

    need("torch")
    model, model_uri = lsp.write("model.py", MODEL)
    path, uri = lsp.write("main.py", MAIN)
    lsp.open(path)
    lsp.open(model)
    empty = await lsp.client.workspace_execute_command_async(
        types.ExecuteCommandParams(command="shapelens.modules", arguments=[{"uri": uri}])
    )
    assert empty == {"modules": []}  # nothing ran yet
    assert (await lsp.run(uri))["status"] == "ok"
    answer = await lsp.client.workspace_execute_command_async(
        types.ExecuteCommandParams(command="shapelens.modules", arguments=[{"uri": model_uri}])
    )
    entries = {(m["class"], m["path"]): m for m in answer["modules"]}
    net = entries[("Net", "")]
    assert net["summary"] == "346 params · (2,3‥7) → (2,3‥7,10) ×3"
    assert net["inputs"][0]["text"] == "(2,3‥7) i64 cpu"
    assert net["rank"] is None and net["calls_sampled"] is False  # three calls: all counted
    lenses = await lsp.client.text_document_code_lens_async(
        types.CodeLensParams(text_document=types.TextDocumentIdentifier(uri=model_uri))
    )
    titles = {lens.range.start.line: lens.command.title for lens in lenses if lens.command}
    # Both Blocks under one lens: one block's parameters, every call, shapes of both.
    assert titles[line_of(model, "class Block") - 1] == (
        "88 params · (2,3‥7,8) → (2,3‥7,8) ×5 (2 instances)"
    )
    assert titles[line_of(model, "class Net") - 1] == "346 params · (2,3‥7) → (2,3‥7,10) ×3"
    bad = await lsp.client.workspace_execute_command_async(
        types.ExecuteCommandParams(command="shapelens.modules", arguments=[{}])
    )
    assert bad["status"] == "error"


LONG_MODEL = (
    """
import torch.nn as nn

"""
    + BLOCK
    + """

class Net(nn.Module):
    def __init__(self, width=16, depth=3):
        super().__init__()
        self.blocks = nn.ModuleList([Block(width) for _ in range(depth)])
        self.head = nn.Sequential(nn.Linear(width, 8), nn.ReLU(), nn.Linear(8, 1))
        self.probe = nn.Linear(width, 2)  # only called once training is over

    def forward(self, x, deep=True):
        for block in self.blocks if deep else self.blocks[:1]:
            x = block(x)
        return self.head(x)
"""
)

LONG_TRAINING = """
import torch
from model import Net


def batches(data, target, size, longer_at=-1):
    for start in range(0, len(data), size):  # 1003 rows: the last batch has 3
        stop = start + size + (12 if start == longer_at else 0)
        yield start, data[start:stop], target[start:stop]


torch.manual_seed(0)
net = Net()
opt = torch.optim.SGD(net.parameters(), lr=0.01)
loss_fn = torch.nn.MSELoss()
data, target = torch.randn(1003, 16), torch.randn(1003, 1)
for epoch in range(6):
    for start, x, y in batches(data, target, 8, longer_at=400 if epoch == 4 else -1):
        pred = net(x, deep=start % 24 != 0)  # every third batch runs one block only
        loss = loss_fn(pred, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
with torch.no_grad():
    wide = torch.randn(2, 16)
    out = net(wide)  # a batch size never seen in training
    probed = net.probe(wide)
"""


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_long_run_keeps_every_shape_and_counts_its_calls(  # type: ignore[no-untyped-def]
    script, tmp_path: Path, backend: str
) -> None:
    """The tree stops watching while nothing changes: every shape is still seen (one 20-row
    batch late in training, which no user line reads: the call of the model wakes the tree;
    the 2-row batch after training), and the calls of the quiet spells are estimated from
    the loop that calls the model: within 1% for the modules every step calls (usually
    exact), within 2% for the blocks only some steps reach (their calls per step are measured on the
    short stretches the tree watched)."""
    need("torch")
    script(LONG_MODEL, "model.py")
    script(LONG_TRAINING)
    run = run_cli("--backend", backend, "--modules", "main.py", cwd=tmp_path, timeout=240)
    assert run.returncode == 0, run.stderr
    assert run.trace is not None
    jsonschema.validate(run.trace, json.loads(SCHEMA_PATH.read_text()))
    modules = {m["path"] or m["class"]: m for m in run.trace["modules"]}
    steps = 6 * 126  # batches of 8 over 1003 rows, six epochs
    deep_steps = steps - 6 * 42  # starts that are multiples of 24 run one block
    expected = {
        "Net": steps + 1,
        "blocks.0": steps + 1,
        "blocks.0.proj": steps + 1,
        "blocks.1": deep_steps + 1,
        "blocks.2.norm": deep_steps + 1,
        "head": steps + 1,
        "head.1": steps + 1,
        "MSELoss": steps,
        "probe": 1,
    }
    calls = {path: modules[path]["calls"] for path in expected}
    assert modules["Net"]["calls_sampled"] and modules["blocks.1"]["calls_sampled"]
    for path, count in expected.items():
        every_step = count in (steps, steps + 1)
        allowed = count // 100 if every_step else count // 50
        assert abs(calls[path] - count) <= allowed, (path, calls[path], count)
    assert "calls_sampled" not in modules["probe"]  # called once, while watched
    net_row = next(row for row in run.stderr.splitlines() if row.startswith("Net "))
    assert net_row.endswith("+")  # the table says the count is an estimate
    # Every shape: the 20 rows in training inside the model, the 2 rows after training.
    for path in ("Net", "blocks.0", "blocks.1.norm", "blocks.2.proj", "head.0"):
        assert modules[path]["inputs"][0]["dim_ranges"] == [[2, 20], [16, 16]], path
    assert modules["MSELoss"]["inputs"][0]["dim_ranges"] == [[3, 20], [1, 1]]
    assert modules["probe"]["inputs"][0]["shape"] == [2, 16]


def test_a_slot_tells_what_is_new() -> None:
    """A batch size inside the ranges seen is nothing new; a wider one, another number of
    dims, dtype or device is (the tree watches every call again after it)."""
    torch = need("torch")
    from shapelens.engine.modules.calls import TensorSlot

    slot = TensorSlot()
    assert slot.would_be_new(torch.ones(8, 4)) and slot.observe(torch.ones(8, 4))
    assert not slot.observe(torch.ones(8, 4))
    assert slot.observe(torch.ones(3, 4))  # below the range
    assert not slot.would_be_new(torch.ones(5, 4)) and not slot.observe(torch.ones(5, 4))
    assert slot.would_be_new(torch.ones(9, 4)) and slot.observe(torch.ones(9, 4))
    assert slot.would_be_new(torch.ones(5, 4, dtype=torch.float64))
    assert slot.observe(torch.ones(5, 4, dtype=torch.float64))
    assert slot.would_be_new(torch.ones(5, 4, 1)) and slot.observe(torch.ones(5, 4, 1))
    assert slot.to_json()["dim_ranges"] is None  # the number of dims varied


def test_a_flush_in_the_middle_of_a_module_call_never_sends_it_half_read_for_good() -> None:
    """The child's flusher thread may drain the tree at any bytecode, also while a call's
    tensors are being read: the call is sent again once it is whole."""
    torch = need("torch")
    tree = ModuleTree(UserCodeScope(ScopeConfig(root=HERE, functions=("call",))), SourceMaps())
    sent: list[Any] = []

    class ShapeReadWhileFlushed(torch.Tensor):  # type: ignore[misc]
        @property
        def shape(self) -> Any:
            sent.append(tree.drain())
            return super().shape

    class Widen(torch.nn.Module):  # type: ignore[misc]
        def forward(self, x: Any) -> Any:
            return torch.cat([x, x], dim=1).as_subclass(ShapeReadWhileFlushed)

    def call(module: Any) -> None:
        module(torch.ones(2, 3))

    built = engine_for(tree.scope.config, backend="settrace")
    events, tracer = built.recorder, built.backend
    tree.install(tracer, events)
    with tracer:
        call(Widen())
    sent.append(tree.drain())  # the run's last flush
    latest = [message for message in sent if message is not None][-1]
    (widen,) = latest["entries"]
    assert widen["calls"] == 1 and widen["outputs"][0]["shape"] == [2, 6]


UNREAD_SHAPE = """
import torch
import torch.nn as nn


def spans(rows, size, longer_at):
    for start in range(0, rows, size):
        yield start, start + size + (12 if start == longer_at else 0)


torch.manual_seed(0)
mlp = nn.Sequential(nn.Linear(16, 8), nn.ReLU(), nn.Linear(8, 1))
data = torch.randn(4000, 16)
total = 0.0
for start, stop in spans(len(data), 8, longer_at=3200):
    total += float(mlp(data[start:stop]).sum())  # no name holds the batch
"""


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_quiet_tree_wakes_before_a_module_gets_a_new_shape(  # type: ignore[no-untyped-def]
    script, tmp_path: Path, backend: str
) -> None:
    """One 20-row batch among 500 of 8, in a tensor no user line stores: only the module
    call itself can show it, and the quiet tree checks calls before they run."""
    need("torch")
    script(UNREAD_SHAPE)
    run = run_cli("--backend", backend, "--modules", "main.py", cwd=tmp_path, timeout=180)
    assert run.returncode == 0, run.stderr
    assert run.trace is not None
    modules = {m["path"] or m["class"]: m for m in run.trace["modules"]}
    assert modules["Sequential"]["calls_sampled"]  # it was quiet for most of the run
    for path in ("Sequential", "0", "2"):
        assert modules[path]["inputs"][0]["dim_ranges"][0] == [8, 20], path
        assert abs(modules[path]["calls"] - 500) <= 5, path


ODD_TENSOR = """
import torch
import torch.nn as nn


class Opaque(torch.Tensor):
    @property
    def shape(self):  # a subclass that hides its shape from Python
        raise RuntimeError("no shape here")


lin = nn.Linear(4, 2)
x = torch.ones(3, 4)
for step in range(600):
    y = lin(x if step < 500 else x.as_subclass(Opaque))
print("done", tuple(y.size()))
"""


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_tensor_that_cannot_be_read_never_fails_the_program(  # type: ignore[no-untyped-def]
    script, tmp_path: Path, backend: str
) -> None:
    """The quiet tree's check runs before each module call, inside a trace callback: what
    it cannot read must not raise into the user's program."""
    need("torch")
    script(ODD_TENSOR)
    run = run_cli("--backend", backend, "--modules", "main.py", cwd=tmp_path, timeout=120)
    assert run.returncode == 0, run.stderr
    assert "done (3, 2)" in run.stdout
    assert run.trace is not None and run.trace["status"] == "ok"
