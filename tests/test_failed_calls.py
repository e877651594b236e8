"""Any torch call that raises on a user's line is explained from the call itself: the op,
each tensor as it was passed (its text at the call), and the lines that made it so."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types

from conftest import CHILD_PYTHON, LspSession, line_of, need, run_cli

need("torch")


def _only(run: Any, kind: str) -> dict[str, Any]:
    found = [f for f in run.trace["findings"] if f["severity"] == "error"]
    assert [f["kind"] for f in found] == [kind], run.trace["findings"]
    [finding] = run.findings(kind)
    return finding  # type: ignore[no-any-return]


def _operand(finding: dict[str, Any], name: str) -> dict[str, Any]:
    [operand] = [o for o in finding["operands"] if o["name"] == name]
    return operand


def test_an_op_no_message_table_knows_names_what_was_passed(script, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    main = script(
        """
        import torch

        def project(points, basis):
            return torch.dot(points, basis)

        points = torch.randn(3, 4)
        basis = torch.randn(4, 5)
        score = project(points, basis.T.contiguous().T)
        """
    )
    run = run_cli("main.py", cwd=tmp_path)
    assert run.returncode == 1
    finding = _only(run, "shape_mismatch")
    assert finding["line"] == line_of(main, "return torch.dot")
    assert finding["op"] == "torch.dot"
    assert [(o["name"], o["shape"]) for o in finding["operands"]] == [
        ("points", [3, 4]),
        ("basis", [4, 5]),
    ]
    assert _operand(finding, "points")["line"] == line_of(main, "points =")
    assert "use `@` or `torch.matmul`" in finding["message"]
    # the listing (stderr: stdout is the program's) shows the op and what it was passed
    assert "torch.dot failed" in run.stderr and "`points` (3, 4)" in run.stderr


def test_a_method_on_an_int64_tensor_recorded_a_line_earlier(script, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    main = script(
        """
        import torch
        labels = torch.randint(0, 3, (8,))
        counts = labels + 1
        average = counts.mean()
        """
    )
    run = run_cli("--quiet", "main.py", cwd=tmp_path)
    finding = _only(run, "dtype_mismatch")
    assert finding["line"] == line_of(main, "average =")
    assert finding["op"] == "Tensor.mean"
    counts = _operand(finding, "counts")
    assert counts["odd"] and counts["dtype"] == "int64"
    assert counts["line"] == line_of(main, "counts =")
    assert finding["expected"] == "float32"
    # the chain goes back to the int64 tensor's birth
    assert [step["line"] for step in finding["chain"]] == [line_of(main, "labels =")]


def test_a_dtype_the_meta_kernel_lets_pass_is_still_the_dtype(script, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """binary_cross_entropy's meta kernel takes an int64 target, its CPU kernel does not:
    the call is tried again on new tensors of plain values, so the verdict is the target's
    dtype, never "their values made it fail"."""
    main = script(
        """
        import torch
        import torch.nn.functional as F

        def batch():
            scores = torch.randn(16, 1)
            labels = (torch.rand(16, 1) > 0.5).long()
            return scores, labels

        scores, labels = batch()
        loss = F.binary_cross_entropy(torch.sigmoid(scores), labels)
        """
    )
    run = run_cli("--quiet", "main.py", cwd=tmp_path)
    finding = _only(run, "dtype_mismatch")
    assert finding["line"] == line_of(main, "loss =")
    assert finding["op"] == "F.binary_cross_entropy"
    labels = _operand(finding, "labels")
    assert labels["odd"] and labels["dtype"] == "int64"
    assert labels["line"] == line_of(main, "labels = (")
    assert finding["expected"] == "float32"
    assert "their values" not in finding["message"]


def test_what_was_passed_not_the_names_on_the_line(script, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    main = script(
        """
        import torch
        import torch.nn.functional as F

        logits = torch.randn(32, 16, 27)
        targets = torch.randint(0, 27, (32, 16))
        loss = F.cross_entropy(logits.view(-1, 27), targets.view(-1, 1))
        """
    )
    run = run_cli("--quiet", "main.py", cwd=tmp_path)
    finding = _only(run, "shape_mismatch")
    assert finding["op"] == "F.cross_entropy"
    assert [(o["name"], o["shape"], o["dtype"]) for o in finding["operands"]] == [
        ("logits.view(-1, 27)", [512, 27], "float32"),
        ("targets.view(-1, 1)", [512, 1], "int64"),
    ]
    notes = [(r["line"], r["message"]) for r in finding["related"]]
    assert (
        line_of(main, "loss ="),
        "`targets.view(-1, 1)`: Tensor.view: (32, 16) → (512, 1)",
    ) in notes
    born = "`targets.view(-1, 1)`: torch.randint made (32, 16) int64 cpu"
    assert (line_of(main, "targets ="), born) in notes


HOOKS = """
        features = []
        for layer in model.modules():  # as feature-extraction code does: every call hooked
            layer.register_forward_hook(lambda module, inputs, output: features.append(output))
"""


@pytest.mark.parametrize("hooked", [False, True])
def test_a_linear_inside_a_sequential_is_named_at_its_own_line(
    script, tmp_path: Path, hooked: bool
) -> None:  # type: ignore[no-untyped-def]
    """Also when forward hooks take module calls off torch's fast path (torch ≥ 2.5 calls
    ``forward`` from a nested ``inner()`` then)."""
    main = script(
        """
        import torch
        from torch import nn

        class Classifier(nn.Module):
            def __init__(self):
                super().__init__()
                self.head = nn.Sequential(
                    nn.Linear(16, 32),
                    nn.ReLU(),
                    nn.Linear(64, 4),
                )

            def forward(self, x):
                return self.head(x)

        model = Classifier()
        """
        + (HOOKS if hooked else "")
        + """
        logits = model(torch.randn(8, 16))
        """
    )
    run = run_cli("--quiet", "main.py", cwd=tmp_path)
    finding = _only(run, "shape_mismatch")
    assert finding["line"] == line_of(main, "return self.head(x)")
    assert finding["op"] == "`self.head` (Sequential)"
    inner = _operand(finding, "self.head[2]")
    assert inner["odd"] and inner["module"]["class"] == "Linear"
    assert inner["module"]["expects"] == {"in_features": 64}
    assert inner["module"]["line"] == line_of(main, "nn.Linear(64, 4)")
    assert _operand(finding, "self.head[2] input")["shape"] == [8, 32]
    assert _operand(finding, "x")["shape"] == [8, 16]
    assert any(r["line"] == line_of(main, "nn.Linear(64, 4)") for r in finding["related"])


def test_a_value_error_is_an_op_error_with_the_operands(script, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    main = script(
        """
        import torch
        from torch import nn
        vocab = nn.Embedding(10, 8)
        tokens = torch.tensor([[3, 12, 1]])
        vectors = vocab(tokens)
        """
    )
    run = run_cli("--quiet", "main.py", cwd=tmp_path)
    finding = _only(run, "op_error")
    assert finding["op"] == "`vocab` (Embedding)"
    assert finding["line"] == line_of(main, "vectors =")
    assert _operand(finding, "vocab")["module"]["expects"] == {
        "num_embeddings": 10,
        "embedding_dim": 8,
    }
    assert _operand(finding, "tokens")["line"] == line_of(main, "tokens =")
    assert "their values made it fail" in finding["message"]


def test_the_batch_of_one_squeezed_away_is_the_cause(script, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    main = script(
        """
        import torch
        from torch import nn

        conv = nn.Conv2d(1, 4, 3, padding=1)
        fc = nn.Linear(4 * 8 * 8, 10)
        images = torch.randn(1, 1, 8, 8)
        features = conv(images).squeeze()
        flat = features.view(features.size(0), -1)
        logits = fc(flat)
        """
    )
    run = run_cli("main.py", cwd=tmp_path)
    finding = _only(run, "shape_mismatch")
    assert finding["line"] == line_of(main, "logits =")
    squeeze = line_of(main, "features =")
    [step] = [r for r in finding["related"] if r["message"].startswith("`flat`: Tensor.squeeze")]
    assert step["line"] == squeeze
    assert step["message"].endswith("(1, 4, 8, 8) → (4, 8, 8), dropped the size-1 dim 0")
    data = [s for s in finding["chain"] if s["op"] == "Tensor.squeeze"]
    assert data[0]["before"]["shape"] == [1, 4, 8, 8] and data[0]["after"]["shape"] == [4, 8, 8]
    # shown under the crash line in the listing, as the related locations are
    assert "dropped the size-1 dim 0" in run.stderr


def test_the_skip_connection_names_where_the_sizes_parted(script, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    main = script(
        """
        import torch
        from torch import nn
        import torch.nn.functional as F

        class UNet(nn.Module):
            def __init__(self):
                super().__init__()
                self.enc = nn.Conv2d(3, 8, 3, stride=2, padding=1)
                self.mid = nn.Conv2d(8, 8, 3, padding=1)
                self.up = nn.ConvTranspose2d(8, 8, 2, stride=2)

            def forward(self, x):
                skip = F.relu(self.enc(x))
                low = F.max_pool2d(skip, 2)
                up = self.up(F.relu(self.mid(low)))
                return torch.cat([up, skip], dim=1)

        out = UNet()(torch.randn(2, 3, 30, 30))
        """
    )
    run = run_cli("--quiet", "main.py", cwd=tmp_path)
    finding = _only(run, "shape_mismatch")
    assert finding["line"] == line_of(main, "return torch.cat")
    assert finding["op"] == "torch.cat"
    parted = [r for r in finding["related"] if "halved the odd size 15 to 7" in r["message"]]
    assert [s["line"] for s in parted] == [line_of(main, "low =")]
    # the shared start of both paths (the input, the strided conv) is shown once
    lines = [s["line"] for s in finding["chain"]]
    assert lines.count(line_of(main, "skip =")) == 1


def test_a_join_along_the_wrong_dim_is_in_the_chain(script, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Three branches' (16, 32) outputs joined with ``torch.cat(outs, dim=0)`` where ``dim=1``
    was meant: the head's ``Linear(96, 4)`` refuses (48, 32). The dim it reads, 32, was set
    by the branches, but the wrong value started at the cat: joined along dim 1, it would be
    the (16, 96) the head takes. The chain shows that line and says so. Written as a user
    writes it: a dataset of dicts and a collate in one file, the model in another, the
    loop in a third."""
    script(
        """
        import torch
        from torch.utils.data import Dataset


        class Features(Dataset):
            def __init__(self, count):
                self.x = torch.randn(count, 12)
                self.y = torch.randint(0, 4, (count,))

            def __len__(self):
                return len(self.x)

            def __getitem__(self, i):
                return {"x": self.x[i], "y": self.y[i]}


        def collate(items):
            return torch.stack([i["x"] for i in items]), torch.stack([i["y"] for i in items])
        """,
        "data.py",
    )
    model = script(
        """
        import torch
        from torch import nn


        class MultiBranch(nn.Module):
            def __init__(self, features, width, branches):
                super().__init__()
                self.branches = nn.ModuleList(nn.Linear(features, width) for _ in range(branches))
                self.head = nn.Linear(width * branches, 4)

            def forward(self, x):
                outs = [torch.relu(branch(x)) for branch in self.branches]
                joined = torch.cat(outs, dim=0)
                return self.head(joined)
        """,
        "model.py",
    )
    script(
        """
        import torch
        from torch.utils.data import DataLoader

        from data import Features, collate
        from model import MultiBranch

        torch.manual_seed(0)
        loader = DataLoader(Features(40), batch_size=16, collate_fn=collate)
        net = MultiBranch(12, 32, 3)
        optimizer = torch.optim.Adam(net.parameters())
        for x, y in loader:
            loss = torch.nn.functional.cross_entropy(net(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            print(f"loss {loss.item():.3f}")
        """,
        "train.py",
    )
    run = run_cli("--quiet", "train.py", cwd=tmp_path)
    assert run.returncode == 1
    finding = _only(run, "shape_mismatch")
    assert (finding["file"], finding["line"]) == (
        str(model),
        line_of(model, "return self.head(joined)"),
    )
    assert _operand(finding, "joined")["shape"] == [48, 32]
    [joined_at] = [
        r["message"]
        for r in finding["related"]
        if r["line"] == line_of(model, "joined =") and "torch.cat" in r["message"]
    ]
    assert joined_at == (
        "`joined`: torch.cat: (16, 32) → (48, 32), along dim 0; along dim 1 it would be (16, 96)"
    )
    # and the chain still goes back to where the dim it reads was set
    lines = [(Path(s["file"]).name, s["line"]) for s in finding["chain"]]
    assert ("model.py", line_of(model, "outs =")) in lines
    assert lines.index(("model.py", line_of(model, "outs ="))) < lines.index(
        ("model.py", line_of(model, "joined ="))
    )


def test_a_join_before_a_layer_norm_is_in_the_chain(script, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The same wrong join before an ``nn.LayerNorm(96)``: its one normalized dim is the size
    it was built for (``normalized_shape=(96,)``, a tuple), so the finding shows it and the
    chain has the cat, with the dim it would have fitted along."""
    path = script(
        """
        import torch
        from torch import nn


        class MultiBranch(nn.Module):
            def __init__(self, features, width, branches):
                super().__init__()
                self.branches = nn.ModuleList(nn.Linear(features, width) for _ in range(branches))
                self.norm = nn.LayerNorm(width * branches)

            def forward(self, x):
                outs = [torch.relu(branch(x)) for branch in self.branches]
                joined = torch.cat(outs, dim=0)
                return self.norm(joined)


        net = MultiBranch(12, 32, 3)
        for step in range(3):
            y = net(torch.randn(16, 12))
        """
    )
    run = run_cli("--quiet", path.name, cwd=tmp_path)
    assert run.returncode == 1
    finding = _only(run, "shape_mismatch")
    assert _operand(finding, "self.norm")["module"]["expects"] == {"normalized_shape": 96}
    [joined_at] = [
        r["message"] for r in finding["related"] if r["line"] == line_of(path, "joined =")
        and "torch.cat" in r["message"]
    ]  # fmt: skip
    assert joined_at.endswith("along dim 0; along dim 1 it would be (16, 96)")


async def test_the_editor_shows_the_call_and_the_chain(lsp: LspSession) -> None:
    path, uri = lsp.write(
        "train.py",
        """
        import torch
        import torch.nn.functional as F

        logits = torch.randn(32, 16, 27)
        targets = torch.randint(0, 27, (32, 16))
        loss = F.cross_entropy(logits.view(-1, 27), targets.view(-1, 1))
        """,
    )
    lsp.open(path)
    result = await lsp.run(uri)
    assert result["status"] == "exception"
    [diagnostic] = [d for d in lsp.client.diagnostics[uri] if d.code == "shape_mismatch"]
    crash = line_of(path, "loss =") - 1
    assert diagnostic.range.start.line == crash
    assert "F.cross_entropy failed" in diagnostic.message
    assert "`targets.view(-1, 1)` (512, 1) int64" in diagnostic.message
    related = [
        (r.location.range.start.line, r.message) for r in diagnostic.related_information or []
    ]
    assert (
        line_of(path, "targets =") - 1,
        "`targets.view(-1, 1)`: torch.randint made (32, 16) int64 cpu",
    ) in related
    hover = await lsp.client.text_document_hover_async(
        types.HoverParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            position=types.Position(crash, 0),
        )
    )
    assert hover is not None
    text = hover.contents.value  # type: ignore[union-attr]
    assert "**shape_mismatch**" in text
    assert "↳ line 6: `targets.view(-1, 1)`: Tensor.view: (32, 16) → (512, 1)" in text


def test_a_caught_error_s_traceback_is_the_programs_own(script, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    script(
        """
        import traceback
        import torch
        try:
            bad = torch.ones(4, 3) @ torch.ones(5, 2)
        except RuntimeError:
            traceback.print_exc()
        """
    )
    run = run_cli("--quiet", "main.py", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    frames = [line for line in run.stderr.splitlines() if line.strip().startswith("File ")]
    assert len(frames) == 1 and "main.py" in frames[0], run.stderr


def test_a_python_torch_function_s_error_prints_as_under_python(script, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """``F.cross_entropy`` hands a watched call to the mode from a frame of its own
    (``return handle_torch_function(...)``) and runs again under it: the traceback shows it
    once, where it ran, as plain python does (caught and printed, and as the run's end)."""
    script(
        """
        import traceback
        import torch
        import torch.nn.functional as F

        logits = torch.randn(8, 5)
        targets = torch.randint(0, 5, (8, 1))
        try:
            F.cross_entropy(logits, targets)
        except RuntimeError:
            traceback.print_exc()
        loss = F.cross_entropy(logits, targets)
        """
    )
    plain = subprocess.run(
        [CHILD_PYTHON or sys.executable, "main.py"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    run = run_cli("--quiet", "main.py", cwd=tmp_path)
    assert (run.returncode, run.stdout, run.stderr) == (1, plain.stdout, plain.stderr)
    assert plain.stderr.count("in cross_entropy") == 2


def test_each_step_names_the_op_that_made_it(script, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Ops handed to the mode through torch's Python wrappers (F.layer_norm, Tensor.split)
    come from frames that die and are made again at the same address: each step still names
    its own op."""
    main = script(
        """
        import torch
        from torch import nn
        ln = nn.LayerNorm(32)
        lin = nn.Linear(32, 96)
        x = torch.randn(8, 16, 32)
        q, k, v = lin(ln(x)).split(32, dim=2)
        y = q.transpose(1, 2).view(8, 512)
        """
    )
    run = run_cli("--quiet", "main.py", cwd=tmp_path)
    finding = _only(run, "shape_mismatch")
    split = line_of(main, "q, k, v =")
    assert [s["op"] for s in finding["chain"] if s["line"] == split] == ["Linear", "Tensor.split"]


@pytest.mark.parametrize(
    ("statement", "advice"),
    [
        # a transposed tensor: the strides are the problem, and .reshape the fix
        ("flat = x.t().view(-1)", "`.view` needs compatible strides; `.reshape` copies if needed"),
        # a batch size written in: the size is wrong, .reshape refuses it as well
        ("flat = x.view(16, 4)", None),
    ],
)
def test_view_advice_only_where_strides_are_the_problem(  # type: ignore[no-untyped-def]
    script, tmp_path: Path, statement: str, advice: str | None
) -> None:
    main = script(
        f"""
        import torch
        x = torch.randn(8, 4)
        {statement}
        """
    )
    run = run_cli("main.py", cwd=tmp_path)
    assert run.returncode == 1
    [finding] = [f for f in run.trace["findings"] if f["line"] == line_of(main, "flat =")]
    assert finding["kind"] == "shape_mismatch"
    assert finding.get("advice") == advice
