"""Programs written as people write them with the libraries they train with (transformers,
timm, Lightning, einops), each traced by ``shapelens run --python`` in an interpreter that
has them (``library_python``: the 3.12 venv, torch 2.14). Each must run to its
end, with the right shapes on its own lines, no hint on a library's lines, and no finding:
these programs are clean, so any finding is a false alarm. Models are built from configs and
fed random data: nothing is downloaded."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from conftest import Run, line_of, rendered, run_cli, told

OFFLINE = {"HF_HUB_OFFLINE": "1"}  # nothing from the Hugging Face hub

GPT2 = """
    import torch
    from torch.utils.data import DataLoader, TensorDataset
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    config = GPT2Config(n_layer=2, n_head=2, n_embd=32, vocab_size=100, n_positions=64)
    model = GPT2LMHeadModel(config)
    tokens = torch.randint(0, config.vocab_size, (12, 16))
    loader = DataLoader(TensorDataset(tokens), batch_size=4, shuffle=True)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)

    model.train()
    for step, (ids,) in enumerate(loader):
        out = model(input_ids=ids, labels=ids)
        logits = out.logits
        loss = out.loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(f"step {step}: loss {loss.item():.4f}")
"""

TIMM = """
    import timm
    import torch
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset

    torch.manual_seed(0)
    model = timm.create_model("resnet18", pretrained=False, num_classes=10)
    images = torch.randn(8, 3, 64, 64)
    labels = torch.randint(0, 10, (8,))
    loader = DataLoader(TensorDataset(images, labels), batch_size=4)
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

    model.train()
    for batch, target in loader:
        logits = model(batch)
        loss = criterion(logits, target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(f"loss {loss.item():.4f}")
"""

LIGHTNING = """
    import lightning as L
    import torch
    from torch import nn
    from torch.nn import functional as F
    from torch.utils.data import DataLoader, TensorDataset


    class Classifier(L.LightningModule):
        def __init__(self, features: int, classes: int):
            super().__init__()
            self.net = nn.Sequential(nn.Linear(features, 32), nn.ReLU(), nn.Linear(32, classes))

        def training_step(self, batch, batch_idx):
            x, y = batch
            logits = self.net(x)
            loss = F.cross_entropy(logits, y)
            self.log("train_loss", loss)
            return loss

        def configure_optimizers(self):
            return torch.optim.Adam(self.parameters(), lr=1e-3)


    torch.manual_seed(0)
    data = TensorDataset(torch.randn(40, 20), torch.randint(0, 3, (40,)))
    loader = DataLoader(data, batch_size=8)
    trainer = L.Trainer(
        accelerator="cpu",
        max_epochs=1,
        limit_train_batches=3,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    trainer.fit(Classifier(features=20, classes=3), loader)
    print("trained", trainer.global_step, "steps")
"""

EINOPS = """
    import torch
    from einops import rearrange, reduce
    from torch import nn


    class SelfAttention(nn.Module):
        def __init__(self, dim: int, heads: int):
            super().__init__()
            self.heads = heads
            self.qkv = nn.Linear(dim, 3 * dim)
            self.proj = nn.Linear(dim, dim)

        def forward(self, x):
            qkv = rearrange(self.qkv(x), "b t (k h d) -> k b h t d", k=3, h=self.heads)
            q, k, v = qkv[0], qkv[1], qkv[2]
            scores = q @ k.transpose(-2, -1) * q.shape[-1] ** -0.5
            attn = scores.softmax(dim=-1)
            out = rearrange(attn @ v, "b h t d -> b t (h d)")
            return self.proj(out)


    torch.manual_seed(0)
    block = SelfAttention(dim=32, heads=4)
    head = nn.Linear(32, 5)
    optimizer = torch.optim.Adam([*block.parameters(), *head.parameters()], lr=1e-3)
    x = torch.randn(2, 10, 32)
    target = torch.randint(0, 5, (2,))
    for _ in range(2):
        pooled = reduce(block(x), "b t c -> b c", "mean")
        loss = nn.functional.cross_entropy(head(pooled), target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"loss {loss.item():.4f}")
"""


def traced(library_python: str, script: Callable[..., Path], source: str) -> tuple[Run, Path]:
    """``source`` as ``train.py`` in a fresh project folder, run by ``shapelens run --python
    LIBRARY_PYTHON``: it ran to its end, and only its own lines have hints."""
    path = script(source, "train.py")
    run = run_cli(path.name, cwd=path.parent, python=library_python, env=OFFLINE, timeout=240)
    assert run.returncode == 0, run.stderr[-4000:]
    assert run.trace is not None and run.trace["status"] == "ok", run.trace
    files = {entry["file"] for entry in run.trace["lines"]}
    assert files == {os.path.realpath(path)}, files  # nothing from site-packages
    return run, path


def shape(run: Run, path: Path, marker: str, name: str) -> list[int] | None:
    """The shape ``name`` had on the line that starts with ``marker``."""
    value: list[int] | None = run.var(path, line_of(path, marker), name)["shape"]
    return value


class FalseAlarm(AssertionError):
    """A finding on a clean program. A test that knows one marks itself ``xfail(strict=True,
    raises=FalseAlarm)``: its other assertions still fail as usual, and once the finding is
    gone the test passes, which fails it until the mark is removed."""


def assert_no_findings(run: Run) -> None:
    assert run.trace is not None
    found = [
        f"{f['kind']} ({f['severity']}) at line {f['line']}: {rendered(f)['message']}"
        for f in run.trace["findings"]
    ]
    if found:
        raise FalseAlarm(found)


def test_a_transformers_gpt2_trains_with_keyword_calls(  # type: ignore[no-untyped-def]
    library_python: str, script
) -> None:
    run, path = traced(library_python, script, GPT2)
    assert shape(run, path, "tokens = ", "tokens") == [12, 16]
    assert shape(run, path, "for step, (ids,)", "ids") == [4, 16]
    assert shape(run, path, "logits = out.logits", "logits") == [4, 16, 100]
    assert shape(run, path, "loss = out.loss", "loss") == []
    assert run.line(path, line_of(path, "loss = out.loss"))["hits"] == 3  # type: ignore[index]
    assert run.stdout.count("loss ") == 3
    assert_no_findings(run)


def test_a_timm_resnet_trains(library_python: str, script) -> None:  # type: ignore[no-untyped-def]
    run, path = traced(library_python, script, TIMM)
    assert shape(run, path, "for batch, target", "batch") == [4, 3, 64, 64]
    assert shape(run, path, "logits = model(batch)", "logits") == [4, 10]
    assert shape(run, path, "loss = criterion", "loss") == []
    assert run.line(path, line_of(path, "loss = criterion"))["hits"] == 2  # type: ignore[index]
    assert_no_findings(run)


def test_a_lightning_module_trains_under_the_trainer(  # type: ignore[no-untyped-def]
    library_python: str, script
) -> None:
    """Lightning 2.6.6's own code calls a torch API that torch 2.14 deprecates (a
    FutureWarning at `trainer.fit(...)`): nothing the program can change, so no finding."""
    run, path = traced(library_python, script, LIGHTNING)
    # training_step is called by the Trainer, from Lightning's own code: still the user's.
    assert shape(run, path, "x, y = batch", "x") == [8, 20]
    assert shape(run, path, "logits = self.net(x)", "logits") == [8, 3]
    assert shape(run, path, "loss = F.cross_entropy", "loss") == []
    assert run.line(path, line_of(path, "loss = F.cross_entropy"))["hits"] == 3  # type: ignore[index]
    assert "trained 3 steps" in run.stdout
    assert_no_findings(run)


def test_einops_in_an_attention_block(library_python: str, script) -> None:  # type: ignore[no-untyped-def]
    run, path = traced(library_python, script, EINOPS)
    assert shape(run, path, "qkv = rearrange", "qkv") == [3, 2, 4, 10, 8]
    assert shape(run, path, "scores = ", "scores") == [2, 4, 10, 10]
    assert shape(run, path, "out = rearrange", "out") == [2, 10, 32]
    assert shape(run, path, "pooled = reduce", "pooled") == [2, 32]
    assert shape(run, path, "loss = nn.functional", "loss") == []
    assert_no_findings(run)


def failed(library_python: str, script: Callable[..., Path], source: str) -> tuple[Run, Path]:
    """``source`` as ``train.py``, run as :func:`traced` runs it, ending with an error."""
    path = script(source, "train.py")
    run = run_cli(path.name, cwd=path.parent, python=library_python, env=OFFLINE, timeout=240)
    assert run.returncode == 1, run.stderr[-4000:]
    assert run.trace is not None and run.trace["status"] == "exception", run.trace
    return run, path


BAD_PATTERN = """
    import torch
    from einops import rearrange


    def split_heads(x, heads):
        return rearrange(x, "b t (h d) -> b h t d", h=heads)


    x = torch.randn(2, 7, 30)
    for heads in (2, 3, 5, 4):
        q = split_heads(x, heads)
"""


def test_an_einops_pattern_that_does_not_fit_says_which_dim(  # type: ignore[no-untyped-def]
    library_python: str, script
) -> None:
    """einops raises from its own code: the finding is at the user's call, names the tensor
    as passed, and says from the pattern (read with einops' parser, not from the message)
    which dim does not fit: 30 features in 4 heads."""
    run, path = failed(library_python, script, BAD_PATTERN)
    [finding] = [f for f in run.trace["findings"] if f["severity"] == "error"]  # type: ignore[index]
    assert finding["line"] == line_of(path, "return rearrange")
    assert finding["kind"] == "shape_mismatch"
    assert finding["op"] == "rearrange"
    assert [(o["name"], o["shape"]) for o in finding["operands"]] == [("x", [2, 7, 30])]
    assert finding["advice"] == "dim 2 is 30, and h=4 does not divide it"


LONG_PROMPT = """
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    config = GPT2Config(n_layer=1, n_head=2, n_embd=16, vocab_size=50, n_positions=32)
    model = GPT2LMHeadModel(config)
    ids = torch.randint(0, 50, (2, 20))
    labels = torch.randint(0, 50, (2, 21))
    out = model(input_ids=ids, labels=labels)
"""


def test_a_model_called_with_keywords_is_explained_by_them(  # type: ignore[no-untyped-def]
    library_python: str, script
) -> None:
    """A transformers model (its forward wrapped in decorators taking ``*args, **kwargs``)
    given labels one token longer than its input ids: the finding is at the user's call and
    names the keyword arguments as passed, whatever failed inside the library."""
    run, path = failed(library_python, script, LONG_PROMPT)
    errors = [f for f in run.trace["findings"] if f["severity"] == "error"]  # type: ignore[index]
    assert [f["line"] for f in errors] == [line_of(path, "out = model(")]
    names = {o["name"]: o["shape"] for o in errors[0]["operands"] if o.get("shape")}
    assert names.get("input_ids=ids") == [2, 20]
    assert names.get("labels=labels") == [2, 21]


TOKEN_ROWS = """
    import torch
    from torch.utils.data import Dataset


    class TokenRows(Dataset):
        def __init__(self, count, length, vocab_size):
            generator = torch.Generator().manual_seed(0)
            self.ids = torch.randint(0, vocab_size, (count, length), generator=generator)

        def __len__(self):
            return len(self.ids)

        def __getitem__(self, i):
            row = self.ids[i]
            if i == 77:
                row = row[:-3]  # a row cut short
            return {"input_ids": row, "labels": row.clone()}
"""

UNDER_THE_TRAINER = """
    import tempfile

    import torch
    from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments

    from data import TokenRows

    torch.manual_seed(0)
    config = GPT2Config(n_layer=1, n_head=2, n_embd=32, vocab_size=256, n_positions=64)
    model = GPT2LMHeadModel(config)
    with tempfile.TemporaryDirectory() as output_dir:
        training = TrainingArguments(
            output_dir=output_dir, per_device_train_batch_size=8, num_train_epochs=1,
            logging_strategy="no", save_strategy="no", report_to=[], use_cpu=True,
            disable_tqdm=True,
        )
        trainer = Trainer(model=model, args=training, train_dataset=TokenRows(96, 32, 256))
        trainer.train()
"""


def test_a_row_cut_short_under_the_trainer_is_named_in_its_batch(  # type: ignore[no-untyped-def]
    library_python: str, script
) -> None:
    """transformers' ``Trainer`` batches a user's dataset with its own collator, whose
    ``torch.stack`` refuses the shuffled batch that holds row 77, three tokens short. No line
    of the script's is in the loop: the finding is at ``trainer.train()`` and names each row
    the stack was given by its index in ``trainer.train_dataset``, the short one with the
    line that cut it."""
    data = script(TOKEN_ROWS, "data.py")
    run, path = failed(library_python, script, UNDER_THE_TRAINER)
    [finding] = [f for f in run.trace["findings"] if f["severity"] == "error"]  # type: ignore[index]
    assert finding["line"] == line_of(path, "trainer.train()")
    assert finding["op"] == "torch.stack in `default_data_collator`"
    [odd] = [o for o in finding["operands"] if o.get("odd")]
    assert (odd["name"], odd["shape"]) == ("trainer.train_dataset[77]['input_ids']", [29])
    others = [o for o in finding["operands"] if not o.get("odd")]
    assert len(others) == 7 and all(o["shape"] == [32] for o in others)
    assert all(o["name"].startswith("trainer.train_dataset[") for o in others)
    assert [(s["file"], s["line"]) for s in finding["chain"]] == [
        (str(data), line_of(data, "row = row[:-3]"))
    ]


SENTENCES = """
    from torch.utils.data import Dataset


    class Sentences(Dataset):
        \"\"\"Tokenized sentences as lists of ids, not padded: two are one token short.\"\"\"

        def __init__(self, count):
            self.rows = [[(i * 7 + j) % 256 for j in range(15 if i in (33, 76) else 16)]
                         for i in range(count)]

        def __len__(self):
            return len(self.rows)

        def __getitem__(self, i):
            return {"input_ids": self.rows[i], "labels": self.rows[i]}
"""


def test_unpadded_token_lists_under_the_trainer_name_the_short_ones(  # type: ignore[no-untyped-def]
    library_python: str, script
) -> None:
    """Lists of token ids never padded: the collator's ``torch.tensor`` refuses a batch of
    lists of two lengths (a ValueError of its own, no tensor passed). The finding names the
    lists it was given by their rows, the short ones first, and calls it a shape mismatch."""
    data = script(SENTENCES, "data.py")
    source = UNDER_THE_TRAINER.replace("TokenRows", "Sentences").replace(
        "Sentences(96, 32, 256)", "Sentences(96)"
    )
    run, path = failed(library_python, script, source)
    [finding] = [f for f in run.trace["findings"] if f["severity"] == "error"]  # type: ignore[index]
    assert finding["kind"] == "shape_mismatch"
    assert finding["line"] == line_of(path, "trainer.train()")
    assert finding["op"] == "torch.tensor in `default_data_collator`"
    odd = [o for o in finding["operands"] if o.get("odd")]
    assert odd and all(o["shape"] == [15] for o in odd)
    assert {o["name"] for o in odd} <= {
        f"trainer.train_dataset[{row}]['input_ids']" for row in (33, 76)
    }
    assert all(o["shape"] == [16] for o in finding["operands"] if not o.get("odd"))
    assert (odd[0]["file"], odd[0]["line"]) == (str(data), line_of(data, "return {"))


GPT2_SHAPES_ONLY = """
import torch
from transformers import GPT2Config, GPT2LMHeadModel

config = GPT2Config(n_layer=2, n_head=2, n_embd=64, vocab_size=500, n_positions=64,
                    bos_token_id=0, eos_token_id=0)
model = GPT2LMHeadModel(config).cuda()
ids = torch.randint(0, 500, (2, 16), device="cuda")
out = model(input_ids=ids, labels=ids)
out.loss.backward()
"""


def test_a_transformers_model_s_row_counts_its_backward(  # type: ignore[no-untyped-def]
    library_python: str, script
) -> None:
    """GPT-2 returns a ``ModelOutput``: its row and its ``transformer``'s (a
    ``BaseModelOutputWithPastAndCrossAttentions``) showed 0 backward FLOPs."""
    path = script(GPT2_SHAPES_ONLY, "train.py")
    run = run_cli(
        "--fake", path.name, cwd=path.parent, python=library_python, env=OFFLINE, timeout=240
    )
    assert run.returncode == 0, run.stderr[-4000:]
    assert run.trace is not None and run.trace["status"] == "ok", run.trace
    costs = {m["path"]: m["cost"] for m in run.trace["modules"]}
    for row in ("", "transformer"):
        # a linear layer's backward: twice its forward (the input's and the weight's grads)
        assert costs[row]["backward_flops"] >= costs[row]["flops"] > 0, (row, costs[row])
    assert costs[""]["backward_flops"] > costs["transformer"]["backward_flops"]  # + lm_head


# -- the whole-script benchmark's library programs, tuned against untuned ----------------------
BENCH_PROGRAMS = Path(__file__).resolve().parents[1] / "bench" / "programs"
LABELS_ONE_SHORT = (
    "labels=input_ids)",
    "labels=input_ids if step < args.steps - 1 else input_ids[:, 1:])",
)
"""GPT-2's labels cut on the last step (a shift done twice): transformers' loss fails."""


@pytest.mark.parametrize(
    ("program", "args", "plant"),
    [
        ("gpt2_hf.py", ("--steps", "6"), LABELS_ONE_SHORT),  # the 6th hit: not checked
        ("gpt2_trainer.py", ("--steps", "6"), None),  # the loop is transformers' Trainer's
        ("timm_resnet.py", ("--steps", "2"), None),
        ("lightning_module.py", ("--samples", "160"), None),
    ],
    ids=["gpt2-labels-cut", "gpt2-trainer", "timm", "lightning"],  # GPT-2 clean: its tests above
)
def test_the_benchmarks_library_programs_tell_the_same_as_untuned(  # type: ignore[no-untyped-def]
    library_python: str, tmp_path: Path, program: str, args: tuple[str, ...], plant: Any
) -> None:
    """Speed tuning (sampled reads, quiet statements and module tree, lines switched off)
    changes nothing the user is told: a run with it all off (``SHAPELENS_UNTUNED=1``)
    reports the same findings, clean and with a bug planted on the last step."""
    path = tmp_path / program
    source = (BENCH_PROGRAMS / program).read_text()
    if plant is not None:
        assert plant[0] in source
        source = source.replace(*plant)
    path.write_text(source)
    runs = [
        run_cli("--quiet", program, *args, cwd=tmp_path, python=library_python, cold=True,
                env={**OFFLINE, **untuned}, timeout=240)
        for untuned in ({}, {"SHAPELENS_UNTUNED": "1"})
    ]  # fmt: skip
    tuned, untuned = runs
    assert tuned.returncode == untuned.returncode == (1 if plant else 0), tuned.stderr[-3000:]
    assert told(tuned) == told(untuned)
    if plant is None:
        assert told(tuned) == []
        if program != "lightning_module.py":  # Lightning's own lines carry no timing, ours do
            assert tuned.stdout == untuned.stdout
    else:
        [(kind, _, line, *_)] = told(tuned)
        assert (kind, line) == ("shape_mismatch", line_of(path, "outputs = model("))
