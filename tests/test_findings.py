"""Each finding fires where it should, and not on ordinary code."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import CHILD_PYTHON, line_of, need, run_cli

pytestmark = pytest.mark.backend


def test_broadcast_only_for_surprising_expansions(script, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    main = script(
        """
        import numpy as np
        a = np.ones((3, 4)); row = np.ones(4); col = np.ones((4, 1)); y = np.ones(4)
        ok1 = a * row
        ok2 = a + 1
        ok3 = -a / 2.0
        ok4 = col[:, None] - col[None, :]
        bad = (y - col) ** 2
        def loss(p, t):
            diff = t - p
            return diff
        for step in range(3):
            l = loss(col, y)
        """
    )
    run = run_cli("--quiet", "main.py", cwd=tmp_path)
    lines = sorted(f["line"] for f in run.findings("broadcast"))
    assert lines == [line_of(main, "bad ="), line_of(main, "diff = t - p")]
    [bad] = [f for f in run.findings("broadcast") if f["line"] == line_of(main, "bad =")]
    assert bad["message"].startswith("broadcast: `y` (4,) - `col` (4, 1) → (4, 4)")


def test_nonfinite_reports_the_first_line(script, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    main = script(
        """
        import numpy as np
        w = np.ones(3)
        for step in range(40):
            logits = w * (10.0 ** step)
            prob = np.exp(logits) / np.exp(logits).sum()
            total = prob.sum()
        """
    )
    run = run_cli("--quiet", "main.py", cwd=tmp_path)
    [finding] = run.findings("nonfinite")
    assert finding["line"] == line_of(main, "prob =")
    assert "`prob`" in finding["message"] and "NaN" in finding["message"]


def test_findings_can_be_turned_off(script, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    script("import numpy as np\ny = np.ones(4); c = np.ones((4, 1))\nd = y - c\n")
    assert run_cli("--quiet", "main.py", cwd=tmp_path).findings("broadcast")
    run = run_cli("--quiet", "--no-findings", "broadcast", "main.py", cwd=tmp_path)
    assert run.findings("broadcast") == []


def test_dtype_origin_is_the_from_numpy_line(script, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    need("torch")
    main = script(
        """
        import numpy as np
        import torch
        from torch import nn

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(2, 1)
            def forward(self, x):
                return self.fc(x)

        raw = np.random.rand(4, 2)
        features = torch.from_numpy(raw)
        scaled = features * 2
        net = Net()
        out = net(scaled)
        """
    )
    run = run_cli("--quiet", "main.py", cwd=tmp_path)
    assert run.returncode == 1
    [finding] = run.findings("dtype_mismatch")
    assert finding["line"] == line_of(main, "return self.fc(x)")
    assert (
        "`x` (4, 2) float64" in finding["message"] and "`self.fc` is float32" in finding["message"]
    )
    assert finding["related"][0]["line"] == line_of(main, "scaled =")


def test_device_origin_with_a_module_on_another_device(script, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    need("torch")
    main = script(
        """
        import torch
        model = torch.nn.Linear(3, 1)
        batch = torch.zeros(2, 3, device="meta")
        pred = model(batch)
        """
    )
    run = run_cli("--quiet", "main.py", cwd=tmp_path)
    [finding] = run.findings("device_mismatch")
    assert finding["line"] == line_of(main, "pred =")
    assert "`batch`" in finding["message"] and "meta" in finding["message"]
    assert finding["related"][0]["line"] == line_of(main, "batch =")
    assert run.findings("dtype_mismatch") == []


def test_nonfinite_in_torch_training_and_gpu_tensors_skipped(script, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    need("torch")
    main = script(
        """
        import torch
        w = torch.ones(4, requires_grad=True)
        big = torch.full((10,), float("nan"), device="meta")
        for step in range(12):
            scale = torch.tensor(10.0) ** (step * 8)
            h = w * scale
            loss = (h * h).sum()
        """
    )
    run = run_cli("--quiet", "main.py", cwd=tmp_path)
    [finding] = run.findings("nonfinite")
    # (h * h) reaches 1e48 at step 3, past float32's 3.4e38, while `scale` (1e24) and `h`
    # are still finite: the loss line's 4th hit is a checked one, and the first non-finite.
    assert finding["line"] == line_of(main, "loss =")
    assert "Inf" in finding["message"]
    # meta (stand-in for GPU) tensors are never scanned
    assert all(f["line"] != line_of(main, "big =") for f in run.trace["findings"])  # type: ignore[index]


def test_a_comment_silences_a_line(script, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    main = script(
        """
        import numpy as np
        y = np.ones(4); c = np.ones((4, 1))
        kept = y - c
        quiet = y - c  # shapelens: ignore[broadcast]
        other = y - c  # shapelens: ignore[nonfinite]
        every = y - c  # shapelens: ignore
        """
    )
    run = run_cli("--quiet", "main.py", cwd=tmp_path)
    lines = sorted(f["line"] for f in run.findings("broadcast"))
    assert lines == [line_of(main, "kept ="), line_of(main, "other =")]


def test_real_program_patterns(script, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The seed's broadcast through calls, torch's own warning, and no alarm on intended
    outer products or causal masks."""
    need("torch")
    main = script(
        """
        import math
        import torch
        import torch.nn as nn
        import torch.nn.functional as F
        fc = nn.Linear(3, 1)
        x = torch.randn(32, 3); y = torch.randn(32, 1)
        loss = ((fc(x) - y.squeeze(1)) ** 2).mean()
        warned = F.mse_loss(fc(x), y.squeeze(1))
        position = torch.arange(0, 50).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, 8, 2) * (-math.log(10000.0) / 8))
        pe = torch.sin(position * div_term)
        pts = torch.randn(5, 2)
        dist = ((pts[:, None, :] - pts[None, :, :]) ** 2).sum(-1)
        att = torch.randn(2, 4, 4)
        att = att.masked_fill(torch.tril(torch.ones(4, 4)) == 0, float("-inf"))
        additive = torch.log(torch.tril(torch.ones(4, 4)))
        scores = torch.randn(4, 4) + additive
        probs = F.softmax(att, dim=-1)
        logp = torch.log(torch.tensor([0.5, 0.5, 0.0]))
        """
    )
    run = run_cli("--quiet", "main.py", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    [broadcast] = run.findings("broadcast")
    assert broadcast["line"] == line_of(main, "loss =")
    assert [(o["name"], o["shape"]) for o in broadcast["operands"]] == [
        ("fc(x)", [32, 1]),
        ("y.squeeze(1)", [32]),
    ]
    assert broadcast["result_shape"] == [32, 32]
    [warning] = run.findings("library_warning")
    assert warning["line"] == line_of(main, "warned =") and warning["severity"] == "warning"
    assert "target size" in warning["error"]
    [nonfinite] = run.findings("nonfinite")
    assert nonfinite["line"] == line_of(main, "logp =") and nonfinite["state"] == "Inf"


def test_errors_name_operands_modules_and_birth_lines(script, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Float token ids made in a data helper reach an Embedding declared in another file;
    a Linear gets an input of the wrong width: each error names the module's expectation,
    the line that declared it, and where the input was born."""
    need("torch")
    model = script(
        """
        import torch.nn as nn


        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.emb = nn.Embedding(10, 8)
                self.fc = nn.Linear(96, 10)

            def forward(self, x):
                return self.fc(x)

            def embed(self, idx):
                return self.emb(idx)
        """,
        "model.py",
    )
    data = script(
        """
        import torch


        def batch():
            tokens = torch.tensor([[1, 2, 3]], dtype=torch.float32)
            return tokens
        """,
        "data.py",
    )
    main = script(
        """
        import sys
        import torch
        from model import Net
        from data import batch

        net = Net()
        if sys.argv[1] == "linear":
            x = torch.randn(48, 48)
            out = net(x)
        else:
            ids = batch()
            e = net.embed(ids)
        """
    )
    linear = run_cli("--quiet", "main.py", "linear", cwd=tmp_path)
    [shape] = linear.findings("shape_mismatch")
    assert (shape["file"], shape["line"]) == (str(model), line_of(model, "return self.fc(x)"))
    fc, x = shape["operands"]
    assert fc["module"] == {
        "class": "Linear",
        "expects": {"in_features": 96},
        "file": str(model),
        "line": line_of(model, "self.fc ="),
    }
    assert (x["name"], x["shape"], x["file"], x["line"]) == (
        "x",
        [48, 48],
        str(main),
        line_of(main, "x = torch.randn"),
    )
    assert "mat1 and mat2 shapes cannot be multiplied" in shape["error"]
    assert "in_features=96" in shape["message"]

    embedding = run_cli("--quiet", "main.py", "embedding", cwd=tmp_path)
    [dtype] = embedding.findings("dtype_mismatch")
    assert dtype["line"] == line_of(model, "return self.emb(idx)")
    idx = dtype["operands"][0]
    assert (idx["name"], idx["dtype"], idx["odd"]) == ("idx", "float32", True)
    assert (idx["file"], idx["line"]) == (str(data), line_of(data, "tokens = torch.tensor"))
    assert dtype["expected"] == "int64"
    assert "`self.emb` expects int64" in dtype["message"]
    emb = dtype["operands"][1]["module"]
    assert emb["expects"] == {"num_embeddings": 10, "embedding_dim": 8}


def test_broadcast_operands_are_complete(script, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    need("torch")
    main = script(
        """
        import torch
        targets = torch.randn(8)
        weights = torch.ones(8, dtype=torch.float64)
        pred = torch.randn(8, 1, requires_grad=True)
        loss = ((targets - pred) ** 2).mean()
        weighted = (weights * targets - pred).sum()
        """
    )
    run = run_cli("--quiet", "main.py", cwd=tmp_path)
    first, second = sorted(run.findings("broadcast"), key=lambda f: f["line"])
    assert first["line"] == line_of(main, "loss =")
    assert [
        (o["name"], o["dtype"], o["device"], o["requires_grad"], o["line"])
        for o in first["operands"]
    ] == [
        ("targets", "float32", "cpu", False, line_of(main, "targets =")),
        ("pred", "float32", "cpu", True, line_of(main, "pred =")),
    ]
    assert all(o["file"] == str(main) for o in first["operands"])
    # an expression operand: the metadata of what it computes from, no birth line of its own
    left = second["operands"][0]
    assert (left["name"], left["dtype"], left["device"], left["line"]) == (
        "weights * targets",
        "float64",
        "cpu",
        None,
    )


def test_a_statement_gone_quiet_leaves_the_next_ones_watched(script, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """An optimizer's ``step()`` makes hundreds of torch calls of its own and goes quiet (its
    calls pass the op watch untouched); the statements after it are watched as before: a
    broadcast between values no name holds is still found."""
    need("torch")
    main = script(
        """
        import torch
        layers = [torch.nn.Linear(4, 4) for _ in range(8)]
        model = torch.nn.Sequential(*layers, torch.nn.Linear(4, 1))
        opt = torch.optim.AdamW(model.parameters(), lr=0.01)
        x, y = torch.randn(8, 4), torch.randn(8, 1)
        for step in range(3):
            loss = ((model(x) - y) ** 2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        xv, yv = torch.randn(5, 4), torch.randn(5, 1)
        val = (model(xv) - yv.squeeze(1)).abs().mean()
        """
    )
    run = run_cli("--quiet", "main.py", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    [found] = run.findings("broadcast")
    assert found["line"] == line_of(main, "val =")
    assert found["message"].startswith(
        "broadcast: `model(xv)` (5, 1) - `yv.squeeze(1)` (5,) → (5, 5)"
    )


def test_a_library_loop_under_one_statement_runs_without_the_mode(tmp_path: Path) -> None:
    """A training loop in code the tracer does not follow (a trainer library, a helper
    outside the project), run by one statement of the user's on its first, watched hit: the
    statement goes quiet at the optimizer's first call, and the op watch's mode is gone by
    the next module call, not left on torch's stack passing every call of the whole loop
    through Python (2.2× the loop's time). The program sees torch's stack and global hooks
    as under python: the hooks that popped the mode are gone too."""
    need("torch")
    vendor, project = tmp_path / "vendor", tmp_path / "project"
    vendor.mkdir()
    project.mkdir()
    (vendor / "trainer_lib.py").write_text(
        textwrap.dedent(
            """
            import torch


            def fit(model, x, y, steps):
                optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
                depths = []
                for _ in range(steps):
                    optimizer.zero_grad()
                    loss = ((model(x) - y) ** 2).mean()
                    loss.backward()
                    optimizer.step()
                    depths.append(torch._C._len_torch_function_stack())
                return depths, len(torch.nn.modules.module._global_forward_pre_hooks)
            """
        )
    )
    (project / "main.py").write_text(
        textwrap.dedent(
            f"""
            import sys

            sys.path.insert(0, {str(vendor)!r})
            import torch
            from trainer_lib import fit

            torch.manual_seed(0)
            model = torch.nn.Sequential(
                torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1)
            )
            depths, hooks = fit(model, torch.randn(32, 8), torch.randn(32, 1), 20)
            print("torch function modes in the loop's steps:", sorted(set(depths)))
            print("global forward pre-hooks after it:", hooks)
            """
        )
    )
    python = CHILD_PYTHON or sys.executable
    plain = subprocess.run(
        [python, "main.py"], cwd=project, capture_output=True, text=True, timeout=120
    )
    assert plain.stdout == (
        "torch function modes in the loop's steps: [0]\nglobal forward pre-hooks after it: 0\n"
    ), plain.stderr
    run = run_cli("--quiet", "main.py", cwd=project)
    assert run.trace is not None, run.stderr
    assert (run.returncode, run.stdout, run.trace["findings"]) == (0, plain.stdout, [])


def test_a_training_steps_housekeeping_goes_quiet_at_its_first_call() -> None:
    """The op watch hands on no call an optimizer's own code makes (its updates of
    parameters and states), nor a module's ``zero_grad()`` (each parameter's ``.grad`` set
    through the mode): the statement goes quiet there, its work still runs, and a later
    checked hit of it is not watched at all. A statement of the user's own ops is."""
    torch = need("torch")
    from shapelens.engine.findings.op_watch import OpWatch

    calls: list[str] = []
    watch = OpWatch(lambda *op: None, lambda code: False)
    watch.on_call = lambda called: calls.append(called.op)
    model = torch.nn.Linear(4, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    model(torch.randn(3, 4)).sum().backward()
    before = model.weight.detach().clone()
    x = torch.randn(3)
    stepped, zeroed = [], []
    for _ in range(2):
        frame = sys._getframe()
        stepped.append(watch.begin(frame)), opt.step(), watch.end(frame)  # one statement
    for _ in range(2):
        frame = sys._getframe()
        zeroed.append(watch.begin(frame)), model.zero_grad(), watch.end(frame)
    assert (stepped, zeroed) == ([True, False], [True, False])
    assert not calls
    assert not torch.equal(model.weight, before)  # the step ran, through the mode
    assert model.weight.grad is None
    frame = sys._getframe()
    watch.begin(frame), x * 2, watch.end(frame)  # the user's own op
    assert calls == ["Tensor.mul"]
