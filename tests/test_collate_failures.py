"""A batch the DataLoader's collate function refuses: the finding is on the user's loop line,
and names each tensor the failing call was given by the sample it came from
(``loader.dataset[9][0]``), the odd one first, with where that sample was made. The loop's
targets still hold the previous batch: none of them is named."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import CHILD_PYTHON, line_of, need, run_cli

need("torch")
pytestmark = pytest.mark.backend  # which hits the op watch follows differs by backend

CROPS = """
import random

from torch.utils.data import Dataset


class RandomCrops(Dataset):
    \"\"\"Random windows of a token stream: inputs and next-token targets.\"\"\"

    def __init__(self, tokens, block, samples, seed=0):
        self.tokens = tokens
        self.block = block
        self.samples = samples
        self.rng = random.Random(seed)

    def __len__(self):
        return self.samples

    def __getitem__(self, i):
        start = self.rng.randint(0, len(self.tokens) - self.block)  # one start too late
        chunk = self.tokens[start : start + self.block + 1]
        return chunk[:-1], chunk[1:]
"""

TINY_LM = """
import torch
from torch import nn


class TinyLM(nn.Module):
    def __init__(self, vocab, dim):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.head = nn.Linear(dim, vocab)

    def forward(self, ids):
        return self.head(torch.relu(self.emb(ids)))
"""

TRAIN = """
import argparse

import torch
from torch.nn import functional as F
from torch.utils.data import DataLoader

from data import RandomCrops
from model import TinyLM

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=6)
parser.add_argument("--batch", type=int, default=8)
args = parser.parse_args()

torch.manual_seed(0)
tokens = torch.randint(0, 50, (300,))
loader = DataLoader(RandomCrops(tokens, block=12, samples=40, seed=5), batch_size=args.batch)
model = TinyLM(50, 16)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
for epoch in range(args.epochs):
    for ids, targets in loader:
        logits = model(ids)
        loss = F.cross_entropy(logits.view(-1, 50), targets.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
    print(f"epoch {epoch} loss {loss.item():.3f}")
"""


def _error(run: Any) -> dict[str, Any]:
    found = [f for f in run.trace["findings"] if f["severity"] == "error"]
    assert [f["kind"] for f in found] == ["shape_mismatch"], run.trace["findings"]
    return found[0]  # type: ignore[no-any-return]


def test_a_crop_one_token_short_in_the_fourth_epoch_is_named_in_its_batch(
    script,  # type: ignore[no-untyped-def]
    tmp_path: Path,
) -> None:
    """A random crop whose last start is one too late: the window runs off the end, one
    token short, in the fourth epoch's second batch (a hit of the loop the op watch does not
    follow). The collate runs again once the run has ended, on the batch the fetch held."""
    data = script(CROPS, "data.py")
    script(TINY_LM, "model.py")
    train = script(TRAIN, "train.py")
    plain = subprocess.run(
        [CHILD_PYTHON or sys.executable, "train.py"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    run = run_cli("--quiet", "train.py", cwd=tmp_path)
    assert (run.returncode, run.stdout, run.stderr) == (1, plain.stdout, plain.stderr)
    assert run.stdout.count("epoch") == 3  # three epochs ran clean
    finding = _error(run)
    assert (finding["file"], finding["line"]) == (str(train), line_of(train, "for ids, targets"))
    assert finding["op"] == "torch.stack in `default_collate`"
    # the loop's 20th batch (3 epochs of 5, then the 4th's second), and the message says so
    assert finding["hit"] == 3 * 5 + 2
    [told] = run.findings("shape_mismatch")
    assert told["message"].startswith(
        "shape mismatch: torch.stack in `default_collate` failed on hit 17: stack expects"
    )
    operands = finding["operands"]
    odd = [o for o in operands if o.get("odd")]
    assert [o["shape"] for o in odd] == [[11]]
    assert [o["shape"] for o in operands if not o.get("odd")] == [[12]] * 7
    # each tensor the stack got, by its sample: one batch of 8 consecutive indices
    indices = sorted(int(o["name"].removeprefix("loader.dataset[").split("]")[0]) for o in operands)
    assert indices == list(range(indices[0], indices[0] + 8)) and indices[0] % 8 == 0
    assert all(o["name"].endswith("][0]") for o in operands)
    # made on the return line: seen made there when the op watch followed that hit (as on
    # torch 2.4 here), else known as the one return of the dataset's __getitem__
    assert (odd[0]["file"], odd[0]["line"]) == (str(data), line_of(data, "return chunk[:-1]"))
    assert odd[0].get("born_as", "<return>[0]") == "<return>[0]"


def test_a_short_dict_sample_on_a_checked_hit_has_the_lines_that_made_it(
    script,  # type: ignore[no-untyped-def]
    tmp_path: Path,
) -> None:
    """A dataset of dicts whose last window is one token short (its length counts one
    window too many), on a hit of the loop the op watch follows: the chain goes back
    through ``__getitem__`` to the slice that ran off the end."""
    data = script(
        """
        from torch.utils.data import Dataset


        class Windows(Dataset):
            def __init__(self, tokens, block):
                self.tokens = tokens
                self.block = block

            def __len__(self):
                return len(self.tokens) // self.block  # one too many: the last has no target

            def __getitem__(self, i):
                ids = self.tokens[i * self.block : (i + 1) * self.block + 1]
                return {"input_ids": ids[:-1], "labels": ids[1:]}
        """,
        "data.py",
    )
    train = script(
        """
        import torch
        from torch.utils.data import DataLoader

        from data import Windows

        torch.manual_seed(0)
        loader = DataLoader(Windows(torch.randint(0, 50, (8 * 13,)), block=8), batch_size=5)
        emb = torch.nn.Embedding(50, 16)
        for epoch in range(3):
            for step, batch in enumerate(loader):
                out = emb(batch["input_ids"]).sum()
            print(epoch, out.item())
        """,
        "train.py",
    )
    run = run_cli("--quiet", "train.py", cwd=tmp_path)
    assert run.returncode == 1
    finding = _error(run)
    assert finding["line"] == line_of(train, "for step, batch")
    shapes = {o["name"]: (o["shape"], bool(o.get("odd"))) for o in finding["operands"]}
    assert shapes == {
        "loader.dataset[12]['input_ids']": ([7], True),
        "loader.dataset[10]['input_ids']": ([8], False),
        "loader.dataset[11]['input_ids']": ([8], False),
    }
    steps = [(Path(s["file"]).name, s["line"]) for s in finding["chain"]]
    assert steps == [
        ("data.py", line_of(data, "ids = self.tokens")),
        ("data.py", line_of(data, "return {")),
    ]


def test_where_the_collate_is_not_run_again_no_earlier_batch_is_named(
    script,  # type: ignore[no-untyped-def]
    tmp_path: Path,
) -> None:
    """A ``--memory`` run runs nothing again (the memory watch would count it). The finding
    on the loop's line then names only what that line evaluates: the loop's targets and the
    body's values are the previous batch's, not what the collate was given."""
    script(CROPS, "data.py")
    script(TINY_LM, "model.py")
    script(TRAIN, "train.py")
    run = run_cli("--quiet", "--memory", "train.py", cwd=tmp_path)
    assert run.returncode == 1
    assert _error(run)["operands"] == []


def test_a_large_batch_of_a_subset_names_the_odd_sample_and_counts_the_rest(
    script,  # type: ignore[no-untyped-def]
    tmp_path: Path,
) -> None:
    """Batches of 64 from a ``Subset`` of the crops: the odd sample first, 7 of the others,
    how many the stack was given, and the return of the wrapped dataset's ``__getitem__``
    (the subset's is torch's) as where the odd one was made."""
    data = script(CROPS, "data.py")
    script(TINY_LM, "model.py")
    source = TRAIN.replace(
        "loader = DataLoader(RandomCrops(tokens, block=12, samples=40, seed=5), "
        "batch_size=args.batch)",
        "crops = RandomCrops(tokens, block=12, samples=200, seed=5)\n"
        "loader = DataLoader(Subset(crops, range(10, 200)), batch_size=64)",
    ).replace(
        "from torch.utils.data import DataLoader", "from torch.utils.data import DataLoader, Subset"
    )
    script(source, "train.py")
    run = run_cli("--quiet", "train.py", cwd=tmp_path)
    assert run.returncode == 1
    finding = _error(run)
    assert finding["op"] == "torch.stack of 62 samples in `default_collate`"  # the last, smaller
    operands = finding["operands"]
    assert [o["shape"] for o in operands] == [[11]] + [[12]] * 7 and operands[0]["odd"]
    assert operands[0]["name"].startswith("loader.dataset[")
    assert (operands[0]["file"], operands[0]["line"]) == (
        str(data),
        line_of(data, "return chunk[:-1]"),
    )


def test_token_lists_of_two_lengths_are_named_where_the_collate_s_own_check_refuses_them(
    script,  # type: ignore[no-untyped-def]
    tmp_path: Path,
) -> None:
    """A dataset of (list of token ids, label): ``default_collate`` checks in Python that the
    lists have one length, and raises with no torch call failing. Run again, the check's own
    arguments are what it refused: the lists, named by their samples, the short one first."""
    data = script(
        """
        from torch.utils.data import Dataset


        class Tokenized(Dataset):
            def __init__(self, texts, vocab):
                self.rows = [[vocab[w] for w in text.split()] for text in texts]
                self.labels = [len(r) % 2 for r in self.rows]

            def __len__(self):
                return len(self.rows)

            def __getitem__(self, i):
                return self.rows[i], self.labels[i]
        """,
        "data.py",
    )
    script(
        """
        import torch
        from torch.utils.data import DataLoader

        from data import Tokenized

        texts = ["a b c d", "b c d a", "c d a b", "d a b c", "a b c", "b c d a"]
        loader = DataLoader(Tokenized(texts, {w: i for i, w in enumerate("abcd")}), batch_size=6)
        emb = torch.nn.Embedding(4, 8)
        for ids, label in loader:
            out = emb(torch.stack(ids, dim=1))
        """,
        "train.py",
    )
    run = run_cli("--quiet", "train.py", cwd=tmp_path)
    assert run.returncode == 1
    finding = _error(run)
    assert finding["op"] == "`default_collate`'s own check"
    named = [(o["name"], o["shape"], bool(o.get("odd"))) for o in finding["operands"]]
    assert named[0] == ("loader.dataset[4][0]", [3], True)
    assert sorted(named[1:]) == [(f"loader.dataset[{i}][0]", [4], False) for i in (0, 1, 2, 3, 5)]
    odd = finding["operands"][0]
    assert (odd["file"], odd["line"]) == (str(data), line_of(data, "return self.rows[i]"))


def test_a_stream_s_odd_sample_is_named_by_its_place_in_the_batch(
    script,  # type: ignore[no-untyped-def]
    tmp_path: Path,
) -> None:
    """An ``IterableDataset`` has no indices: its samples are named by their place in the
    batch the DataLoader took from the stream, and made at its ``__iter__``'s one yield."""
    path = script(
        """
        import torch
        from torch.utils.data import DataLoader, IterableDataset


        class Stream(IterableDataset):
            def __iter__(self):
                for i in range(40):
                    n = 8 if i != 21 else 7
                    yield torch.arange(n), i % 3


        loader = DataLoader(Stream(), batch_size=4)
        for epoch in range(2):
            for x, y in loader:
                z = x.float().mean()
        """
    )
    run = run_cli("--quiet", path.name, cwd=tmp_path)
    assert run.returncode == 1
    finding = _error(run)
    named = [(o["name"], o["shape"], bool(o.get("odd"))) for o in finding["operands"]]
    assert named == [
        ("batch[1][0]", [7], True),
        ("batch[0][0]", [8], False),
        ("batch[2][0]", [8], False),
        ("batch[3][0]", [8], False),
    ]
    odd = finding["operands"][0]
    assert (odd["line"], odd["born_as"]) == (line_of(path, "yield torch.arange"), "<yield>[0]")


LINES = """
from torch.utils.data import Dataset


class Lines(Dataset):
    \"\"\"A window of each line, one token longer each epoch (a curriculum), and its targets.\"\"\"

    def __init__(self, lines, length):
        self.lines = lines
        self.length = length

    def __len__(self):
        return len(self.lines)

    def __getitem__(self, i):
        ids = self.lines[i][: self.length + 1]
        return ids[:-1], ids[1:]
"""

WORKERS_TRAIN = """
import argparse

import torch
from torch.nn import functional as F
from torch.utils.data import DataLoader

from data import {dataset}
from model import TinyLM

parser = argparse.ArgumentParser()
parser.add_argument("--workers", type=int, default=2)
args = parser.parse_args()

torch.manual_seed(0)
{make}
loader = DataLoader(
    dataset, batch_size=8, shuffle=True, num_workers=args.workers,
    generator=torch.Generator().manual_seed(1),
)
model = TinyLM(50, 16)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
for epoch in range(6):
    {each_epoch}
    for ids, targets in loader:
        loss = F.cross_entropy(model(ids).view(-1, 50), targets.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
    print(f"epoch {{epoch}} loss {{loss.item():.3f}}")
"""


def test_a_batch_a_worker_failed_on_is_fetched_again_and_named_by_sample(
    script,  # type: ignore[no-untyped-def]
    tmp_path: Path,
) -> None:
    """With ``num_workers=2`` the collate fails in a worker process, and this process gets
    its traceback as text only. Line 37 is three tokens short of the others: in the fourth
    epoch its window is one token short of the batch's. The batch's indices are kept when
    sent, so the batch is fetched and collated again here once the run has ended."""
    data = script(LINES, "data.py")
    script(TINY_LM, "model.py")
    make = (
        "lines = [torch.randint(0, 50, (14,)) for _ in range(40)]\n"
        "lines[37] = lines[37][:11]\n"
        "dataset = Lines(lines, length=8)"
    )
    train = script(
        WORKERS_TRAIN.format(dataset="Lines", make=make, each_epoch="dataset.length = 8 + epoch"),
        "train.py",
    )
    plain = subprocess.run(
        [CHILD_PYTHON or sys.executable, "train.py"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    run = run_cli("--quiet", "train.py", cwd=tmp_path)
    assert (run.returncode, run.stdout) == (1, plain.stdout)
    # The DataLoader's own frames differ from run to run (whether the batch came back before
    # it was due), under plain python too: the rest of the error is the program's.
    error = "RuntimeError: Caught RuntimeError in DataLoader worker process"
    assert error in plain.stderr
    assert run.stderr.partition(error)[1:] == plain.stderr.partition(error)[1:]
    assert run.stderr.splitlines()[:3] == plain.stderr.splitlines()[:3]
    assert run.stdout.count("epoch") == 3
    finding = _error(run)
    assert (finding["file"], finding["line"]) == (str(train), line_of(train, "for ids, targets"))
    assert finding["op"] == "torch.stack in `default_collate`"
    assert 3 * 5 < finding["hit"] <= 4 * 5  # a batch of the fourth epoch
    [told] = run.findings("shape_mismatch")
    # the worker's own error, not the text that carried it to this process
    assert "failed on hit" in told["message"]
    assert "stack expects each tensor to be equal size" in told["message"]
    assert "Caught RuntimeError" not in told["message"]
    operands = finding["operands"]
    named = [(o["name"], o["shape"]) for o in operands if o.get("odd")]
    assert named == [("loader.dataset[37][0]", [10])]
    assert [o["shape"] for o in operands if not o.get("odd")] == [[11]] * 7
    assert (operands[0]["file"], operands[0]["line"]) == (
        str(data),
        line_of(data, "return ids[:-1]"),
    )


TORCH_CROPS = """
import torch
from torch.utils.data import Dataset


class TorchCrops(Dataset):
    \"\"\"Random windows of a token stream, drawn with torch's generator (reseeded in each
    DataLoader worker).\"\"\"

    def __init__(self, tokens, block, samples):
        self.tokens = tokens
        self.block = block
        self.samples = samples

    def __len__(self):
        return self.samples

    def __getitem__(self, i):
        start = int(torch.randint(0, len(self.tokens) - self.block + 1, ()))  # one too late
        chunk = self.tokens[start : start + self.block + 1]
        return chunk[:-1], chunk[1:]
"""


def test_a_worker_s_random_batch_is_not_named_by_samples_drawn_here(
    script,  # type: ignore[no-untyped-def]
    tmp_path: Path,
) -> None:
    """Random crops a third of which run one token short, drawn in each worker from its own
    seed: fetched again here, the batch's crops are others (and most batches fail here too,
    on other samples). Its samples are not named: they would not be the worker's."""
    script(TORCH_CROPS, "data.py")
    script(TINY_LM, "model.py")
    make = (
        "tokens = torch.randint(0, 50, (14,))\ndataset = TorchCrops(tokens, block=12, samples=40)"
    )
    script(
        WORKERS_TRAIN.format(dataset="TorchCrops", make=make, each_epoch="pass"),
        "train.py",
    )
    run = run_cli("--quiet", "train.py", cwd=tmp_path)
    assert run.returncode == 1
    assert "Caught RuntimeError in DataLoader worker process" in run.stderr
    for finding in run.trace["findings"]:
        assert not any("dataset[" in o.get("name", "") for o in finding.get("operands", []))


def test_a_sample_sized_where_it_was_bound_is_born_on_that_line(
    script,  # type: ignore[no-untyped-def]
    tmp_path: Path,
) -> None:
    """makemore's dataset without its padding: ``x`` is sized by its word where it is bound,
    filled in place, and returned as ``return x, y``. The fifth batch holds a shorter word,
    fetched in a worker (no line of ``__getitem__`` ran traced): the odd sample was made
    where ``x`` was bound (where its size went wrong), not on the return line."""
    data = script(
        """
        import torch
        from torch.utils.data import Dataset


        class Words(Dataset):
            def __init__(self, words):
                self.words = words
                self.stoi = {c: i + 1 for i, c in enumerate(sorted(set("".join(words))))}

            def __len__(self):
                return len(self.words)

            def __getitem__(self, idx):
                word = self.words[idx]
                ix = torch.tensor([self.stoi[c] for c in word], dtype=torch.long)
                x = torch.zeros(len(word) + 1, dtype=torch.long)
                y = torch.zeros(len(word) + 1, dtype=torch.long)
                x[1:] = ix
                y[:-1] = ix
                return x, y
        """,
        "data.py",
    )
    train = script(
        """
        import torch
        from torch.utils.data import DataLoader

        from data import Words

        words = ["emma", "liam", "noah", "mila"] * 9 + ["lucy", "ava", "owen", "zoey"]
        loader = DataLoader(Words(words), batch_size=8, num_workers=2)
        embed = torch.nn.Embedding(30, 8)
        for epoch in range(3):
            for x, y in loader:
                loss = embed(x).sum()
        """,
        "train.py",
    )
    run = run_cli("--quiet", "train.py", cwd=tmp_path)
    assert run.returncode == 1
    finding = _error(run)
    assert (finding["file"], finding["line"]) == (str(train), line_of(train, "for x, y in"))
    assert finding["hit"] == 5
    odd = [o for o in finding["operands"] if o.get("odd")]
    assert [(o["name"], o["shape"]) for o in odd] == [("loader.dataset[37][0]", [4])]
    assert (odd[0]["file"], odd[0]["line"], odd[0]["born_as"]) == (
        str(data),
        line_of(data, "x = torch.zeros"),
        "x",
    )
