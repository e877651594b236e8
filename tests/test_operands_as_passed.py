"""A failing call names every tensor as it was passed: inside the tuple of an RNN's state
(``hidden[1]``), by keyword (``key_padding_mask=padding_mask``), stored into a slice; a
library's own check (an LSTM's hidden size, a MultiheadAttention assertion) is explained from
the call the program made; and a layer refused its input is followed back to the line that
set the dim it reads."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from conftest import line_of, need, run_cli

need("torch")


def _error(run: Any) -> dict[str, Any]:
    assert run.trace is not None, run.stderr
    errors = [f for f in run.trace["findings"] if f["severity"] == "error"]
    assert len(errors) == 1, run.trace["findings"]
    [finding] = run.findings(errors[0]["kind"])
    return finding  # type: ignore[no-any-return]


def _operands(finding: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {o["name"]: o for o in finding["operands"]}


STATE = """
import torch
from torch import nn

torch.manual_seed(0)


class Tagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(4, 8, num_layers=2, batch_first=True)
        self._c0 = None

    def initial_state(self, batch):
        h0 = torch.zeros(2, batch, 8)
        if self._c0 is None:  # cached once, at the first batch's size
            self._c0 = torch.zeros(2, batch, 8)
        return h0, self._c0

    def forward(self, x):
        state = self.initial_state(x.size(0))
        out, _ = self.lstm(x, state)
        return out


model = Tagger()
for batch in (16, 16, 16, 4):
    out = model(torch.randn(batch, 5, 4))
"""


def test_a_library_check_on_a_state_tuple_names_each_element(script, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """nn.LSTM checks the hidden state in Python: no torch op fails, the call is still
    shown with the tuple's elements as passed, each with the line that made it."""
    main = script(STATE)
    run = run_cli("main.py", cwd=tmp_path)
    assert run.returncode == 1
    finding = _error(run)
    assert (finding["kind"], finding["line"]) == ("shape_mismatch", line_of(main, "out, _ ="))
    assert finding["op"] == "`self.lstm` (LSTM)"
    assert finding["error"] == "Expected hidden[1] size (2, 4, 8), got [2, 16, 8]"
    operands = _operands(finding)
    assert operands["state[0]"]["shape"] == [2, 4, 8]
    assert operands["state[1]"]["shape"] == [2, 16, 8]
    assert operands["state[1]"]["line"] == line_of(main, "self._c0 = torch.zeros")
    assert operands["x"]["shape"] == [4, 5, 4]


MASK = """
import torch
from torch import nn

torch.manual_seed(0)
attn = nn.MultiheadAttention(16, 2, batch_first=True)
tokens = torch.randint(1, 9, (4, 6))
tokens[:, 4:] = 0
x = torch.randn(4, 6, 16)
padding_mask = tokens == 0
out, _ = attn(x, x, x, key_padding_mask=padding_mask)
padding_mask = (tokens == 0).long()
out, _ = attn(x, x, x, key_padding_mask=padding_mask)
"""


def test_a_keyword_argument_is_named_by_its_keyword(script, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """MultiheadAttention asserts on an int64 padding mask: a dtype_mismatch that names the
    mask as passed (``key_padding_mask=``) and where it was made, the query once."""
    main = script(MASK)
    run = run_cli("main.py", cwd=tmp_path)
    assert run.returncode == 1
    finding = _error(run)
    last = len(main.read_text().splitlines())
    assert (finding["kind"], finding["line"]) == ("dtype_mismatch", last)
    operands = _operands(finding)
    assert list(operands) == ["key_padding_mask=padding_mask", "x"]  # the odd one first
    mask = operands["key_padding_mask=padding_mask"]
    assert (mask["dtype"], mask["odd"], mask["line"]) == ("int64", True, last - 1)


LAYOUT = """
import torch
from torch import nn


def features(waves, n_fft=16, hop=8):
    frames = waves.unfold(-1, n_fft, hop)
    spec = torch.fft.rfft(frames, dim=-1).abs()
    return torch.log1p(spec)


conv = nn.Conv1d(9, 4, 3)
waves = torch.randn(2, 200)
spec = features(waves)
out = conv(spec)
"""


def test_a_refused_layer_s_input_is_followed_to_where_its_dim_was_set(
    script, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    """Conv1d wants 9 channels in dim 1; the spectrogram has its 24 frames there: the chain
    is the unfold that put them there, not every step that changed the shape."""
    main = script(LAYOUT)
    run = run_cli("main.py", cwd=tmp_path)
    assert run.returncode == 1
    finding = _error(run)
    assert finding["line"] == line_of(main, "out = conv(spec)")
    changes = [(s["line"], s["op"]) for s in finding["chain"] if s.get("before")]
    assert changes == [(line_of(main, "frames = waves.unfold"), "Tensor.unfold")]
    assert finding["chain"][0]["line"] == line_of(main, "waves = torch.randn")


QUEUE = """
import torch

queue = torch.zeros(8, 20)
pointer = 0
for step in range(120):
    keys = torch.randn(3 if step < 100 else 6, 8)
    end = pointer + keys.shape[0]
    if end > 20:
        pointer, end = 16, 16 + keys.shape[0]
    queue[:, pointer:end] = keys.T
    pointer = end % 20
"""


def test_a_store_into_a_slice_on_a_late_hit_names_both_sides(script, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    main = script(QUEUE)
    run = run_cli("main.py", cwd=tmp_path)
    assert run.returncode == 1
    finding = _error(run)
    assert (finding["kind"], finding["line"]) == ("shape_mismatch", line_of(main, "queue[:,"))
    assert finding["op"] == "Tensor.__setitem__"
    assert set(_operands(finding)) == {"queue", "keys.T"}
    assert _operands(finding)["keys.T"]["shape"] == [8, 6]


BRANCHES = """
import torch
from torch import nn


class MultiBranch(nn.Module):
    def __init__(self, features=12, hidden=32, branches=3):
        super().__init__()
        self.branches = nn.ModuleList(
            [nn.Sequential(nn.Linear(features, hidden), nn.ReLU()) for _ in range(branches)]
        )

    def forward(self, x):
        outs = [branch(x) for branch in self.branches]
        return torch.cat(outs, dim=1)
"""

BRANCHES_TRAIN = """
import torch
from torch.utils.data import DataLoader, TensorDataset

from model import MultiBranch


def collate(batch):
    return torch.cat([features for features, _ in batch]), torch.stack([y for _, y in batch])


data = TensorDataset(torch.randn(40, 12), torch.randint(0, 4, (40,)))
model = MultiBranch()
for x, y in DataLoader(data, batch_size=16, collate_fn=collate):
    out = model(x)
"""


@pytest.mark.backend  # a comprehension's frame is the interpreter's
def test_a_call_in_a_list_comprehension_names_what_it_passed(script, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """``[branch(x) for branch in self.branches]``: on 3.11 the comprehension runs in a frame
    of its own, where ``branch`` lives; the call is explained as on 3.12, which inlines it:
    ``branch`` and ``x`` as passed, and ``x`` followed back to the collate that flattened the
    batch with ``torch.cat`` where ``torch.stack`` was meant."""
    model = script(BRANCHES, "model.py")
    train = script(BRANCHES_TRAIN, "train.py")
    run = run_cli("train.py", cwd=tmp_path)
    assert run.returncode == 1
    finding = _error(run)
    assert (finding["kind"], finding["line"]) == ("shape_mismatch", line_of(model, "outs ="))
    operands = _operands(finding)
    assert operands["x"]["shape"] == [192]
    assert "branch" in operands, sorted(operands)
    chain = [(Path(s["file"]).name, s["line"], s.get("op")) for s in finding["chain"]]
    assert ("train.py", line_of(train, "return torch.cat"), "torch.cat") in chain, chain
    assert finding["chain"][-1]["after"]["shape"] == [192]
