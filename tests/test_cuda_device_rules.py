"""A simulated GPU fails where a real one fails, and only there: every rule of
``tests/data/cuda_device_rules.py`` run through ``shapelens run --fake`` (CUDA simulated on
this CPU-only machine; on a GPU machine the fake tensors sit on the real device)."""

from __future__ import annotations

import json
import runpy
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from conftest import REPO, line_of, need, run_cli

torch = need("torch")

TABLE = runpy.run_path(str(REPO / "tests" / "data" / "cuda_device_rules.py"))
RULES: list[dict[str, Any]] = TABLE["RULES"]
FAKE_INTERNALS = ("FakeTensor", "fake_tensor", "_subclasses", "_decomp", "_dynamo", "meta",
                  "overrides.py", "shapelens/")  # fmt: skip


def _program(rules: list[dict[str, Any]]) -> str:
    """Every rule as a function of one program, each called in turn; a line per rule says
    what it raised (the class and the message's first line), as JSON."""
    parts = ["import json", TABLE["PRELUDE"]]
    for rule in rules:
        body = textwrap.indent(textwrap.dedent(rule["code"]).strip("\n"), "    ")
        parts.append(f"def rule_{rule['name']}():\n{body}\n")
    parts.append(
        textwrap.dedent(
            """
            for name, rule in list(globals().items()):
                if not name.startswith("rule_"):
                    continue
                try:
                    rule()
                    raised = None
                except Exception as err:
                    raised = [type(err).__name__, (str(err).splitlines() or [""])[0]]
                print("RULE", json.dumps([name[len("rule_"):], raised]), flush=True)
            """
        )
    )
    return "\n".join(parts)


def test_the_table_covers_what_the_issue_lists() -> None:
    names = [rule["name"] for rule in RULES]
    assert len(names) >= 40 and len(set(names)) == len(names)
    assert {rule["raises"] for rule in RULES} == {None, "RuntimeError"}
    assert all(rule.get("says") for rule in RULES if rule["raises"])
    for topic in ("embedding", "index_select", "gather", "scatter", "where", "masked_fill",
                  "cat", "matmul", "linear", "conv", "cross_entropy", "adam", "index",
                  "0dim", "inplace", "to_"):  # fmt: skip
        assert any(topic in name for name in names), topic


def test_a_shape_only_run_raises_where_a_gpu_raises_and_only_there(tmp_path: Path) -> None:
    (tmp_path / "rules.py").write_text(_program(RULES))
    run = run_cli("--fake", "rules.py", cwd=tmp_path, timeout=240)
    assert run.returncode == 0 and run.trace is not None, run.stderr[-3000:]
    assert run.trace["status"] == "ok"
    seen = dict(
        json.loads(line.removeprefix("RULE "))
        for line in run.stdout.splitlines()
        if line.startswith("RULE ")
    )
    assert set(seen) == {rule["name"] for rule in RULES}
    wrong = []
    for rule in RULES:
        raised = seen[rule["name"]]
        if rule["raises"] is None:
            ok = raised is None
        else:  # the GPU's class and words, the devices as the program knows them
            ok = (
                raised is not None
                and raised[0] == rule["raises"]
                and rule["says"] in raised[1]
                and not any(word in raised[1] for word in FAKE_INTERNALS)
            )
        if not ok:
            wrong.append((rule["name"], rule["raises"], raised))
    assert not wrong, "\n".join(map(str, wrong))


def test_a_device_error_reads_as_on_the_gpu(script, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The user's frames and torch's error, as a GPU run prints them: no fake-tensor frames,
    no torch function mode's, no FakeTensor exception class."""
    main = script(
        """
        import torch
        import torch.nn.functional as F

        def loss_of(logits, targets):
            return F.cross_entropy(logits, targets)

        logits = torch.randn(8, 5, device="cuda")
        targets = torch.randint(0, 5, (8,))
        loss = loss_of(logits, targets)
        """
    )
    run = run_cli("--fake", "main.py", cwd=tmp_path, timeout=60)
    assert run.returncode == 1 and run.trace is not None, run.stderr
    error = run.trace["exception"]
    assert error["type"] == "RuntimeError"
    assert error["line"] == line_of(main, "return F.cross_entropy(")
    start = run.stderr.index("Traceback (most recent call last):")
    end = run.stderr.index("\n", run.stderr.index("RuntimeError: ", start))
    traceback = run.stderr[start:end]
    frames = [line.strip() for line in traceback.splitlines() if line.strip().startswith("File ")]
    assert [f.split(",")[0] for f in frames[:2]] == [f'File "{main}"'] * 2, traceback
    assert frames[1].endswith("in loss_of")
    assert all("torch/nn/functional.py" in f for f in frames[2:]), traceback
    assert traceback.splitlines()[-1] == (
        "RuntimeError: Expected all tensors to be on the same device, but found at least two "
        "devices, cuda:0 and cpu!"
    )
    assert not [word for word in FAKE_INTERNALS if word in traceback], traceback


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_a_real_gpu_raises_where_the_table_says(tmp_path: Path) -> None:
    """The table's ground truth, recorded on the GPU by the script a user would run."""
    out = tmp_path / "observed.json"
    script = REPO / "scripts" / "record_cuda_rules.py"
    done = subprocess.run(
        [sys.executable, str(script), str(out)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(out.read_text())
    assert report["rules"] == report["agree"] == len(RULES)
