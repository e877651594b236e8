"""torch.compile under ShapeLens: compiled functions run eagerly by default (their lines get
hints), ``--compile`` keeps them compiled, and dynamo never traces ShapeLens's own code."""

from __future__ import annotations

import importlib
import json
import sys
import types
from pathlib import Path
from typing import Any

import jsonschema
import pytest

import shapelens
from shapelens.engine.findings.nonfinite_scan import nonfinite_flags
from shapelens.engine.recording import values
from shapelens.engine.recording.run_records import RunRecords
from shapelens.engine.recording.scope import ScopeConfig, UserCodeScope
from shapelens.engine.torch_support.torch_compile import CompileControl
from shapelens.lsp.settings import parse_settings
from shapelens.trace.codec import SCHEMA_PATH, trace_from_json, trace_to_json

from conftest import Run, line_of, need, run_cli

pytestmark = pytest.mark.backend

PACKAGE_DIR = str(Path(shapelens.__file__).resolve().parent)

# A tiny model, compiled, trained for a few steps. `scale` is allowed into the graph:
# dynamo runs it on fake tensors while it traces, which must not count as a hit.
# backend="eager": dynamo traces as usual, without inductor's code generation (seconds).
TRAINING = """
import torch
from torch import nn


@torch.compiler.allow_in_graph
def scale(t):
    scaled = t * 2.0
    return scaled


class Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 2)

    def forward(self, x):
        h = self.fc(x)
        s = scale(h)
        out = torch.relu(s)
        return out


model = torch.compile(Tiny(), backend="eager")
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    pred = model(torch.ones(4, 3))
    loss = pred.sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
print("trained")
"""


def _assert_no_warning_from_us(run: Run) -> None:
    """Nothing in the program's output points into ShapeLens (dynamo tracing our callbacks
    warned there and broke graphs on them)."""
    output = run.stdout + run.stderr
    assert PACKAGE_DIR not in output, output
    assert "Graph break" not in output and "Dynamo does not know" not in output, output


def _validate(trace: dict[str, Any]) -> None:
    jsonschema.validate(trace, json.loads(SCHEMA_PATH.read_text()))


def test_compiled_functions_run_eagerly_with_hints_by_default(script, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    need("torch")
    main = script(TRAINING)
    run = run_cli("main.py", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert "trained" in run.stdout
    _assert_no_warning_from_us(run)
    assert run.trace is not None
    _validate(run.trace)
    assert run.trace["compile"] == "eager"
    assert "torch.compile ran eagerly" in run.stderr  # the summary line says so
    for marker, name, shape in [
        ("h = self.fc", "h", [4, 2]),
        ("s = scale", "s", [4, 2]),
        ("out = torch.relu", "out", [4, 2]),
        ("def forward", "x", [4, 3]),
    ]:
        var = run.var(main, line_of(main, marker), name)
        assert (var["shape"], var["hits"]) == (shape, 3), (marker, var)


def test_keep_compile_compiles_and_dynamo_never_traces_shapelens(script, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    need("torch")
    main = script(TRAINING)
    # dynamo logs every frame it starts to trace: none of them may be ours.
    run = run_cli("--compile", "main.py", cwd=tmp_path, env={"TORCH_LOGS": "dynamo"})
    assert run.returncode == 0, run.stderr
    assert "trained" in run.stdout
    _assert_no_warning_from_us(run)
    assert run.trace is not None
    _validate(run.trace)
    assert run.trace["compile"] == "compiled"
    assert "torch.compile kept" in run.stderr
    # Real calls only: dynamo's own run of `scale` on fake tensors is not the program's.
    scaled = run.var(main, line_of(main, "scaled ="), "scaled")
    assert (scaled["shape"], scaled["hits"]) == ([4, 2], 3)
    assert run.var(main, line_of(main, "pred ="), "pred")["shape"] == [4, 2]


async def test_the_language_server_reports_the_mode_and_passes_the_setting(lsp) -> None:  # type: ignore[no-untyped-def]
    need("torch")
    from lsprotocol import types as lsp_types

    path, uri = lsp.write(
        "main.py",
        """
        import torch

        def double(t):
            doubled = t * 2
            return doubled

        y = torch.compile(double, backend="eager")(torch.ones(3))
        """,
    )
    lsp.open(path)
    doubled = line_of(path, "doubled =") - 1

    async def run(mode: str) -> dict[int, str]:
        result = await lsp.run(uri)
        assert (result["status"], result["compileMode"]) == ("ok", mode), result
        return await lsp.hints(uri)  # type: ignore[no-any-return]

    assert (await run("eager"))[doubled] == "doubled (3,)"
    lsp.client.workspace_did_change_configuration(
        lsp_types.DidChangeConfigurationParams(settings={"shapelens": {"compile": True}})
    )
    assert doubled not in await run("compiled")  # compiled code has no lines to show


def test_the_nonfinite_scan_stands_aside_while_torch_traces() -> None:
    """Under a dispatch mode (fake tensors, export's proxy tracing, a user's own mode) the
    scan's reductions would run on fake data or be recorded into the mode's graph."""
    need("torch")
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    class Recording(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.ops: list[Any] = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            self.ops.append(func)
            return func(*args, **(kwargs or {}))

    nan = torch.tensor([1.0, float("nan")])
    assert nonfinite_flags(nan, values.TORCH, 100, False) == (True, False)
    with Recording() as mode:
        assert nonfinite_flags(nan, values.TORCH, 100, False) is None
    assert mode.ops == []


# -- which torch.compile calls are the program's own (no torch needed) ---------------------
def _fake_torch(tmp_path: Path) -> Path:
    """A stand-in torch package whose compile records its keyword arguments and, like
    torch's, answers ``compile(mode=...)`` with a decorator ``fn`` that calls it again."""
    package = tmp_path / "site" / "torch"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(
        "calls = []\n"
        "def compile(model=None, **kwargs):\n"
        "    if model is None:\n"
        "        def fn(model):\n"
        "            return compile(model, **kwargs)\n"
        "        return fn\n"
        "    calls.append(kwargs)\n"
        "    return model\n"
        "def internal(f):\n"
        "    return compile(f, fullgraph=True)\n"
    )
    return package.parent


def _user_code(tmp_path: Path, source: str, torch: types.ModuleType) -> None:
    path = tmp_path / "project" / "user.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(source)
    exec(compile(source, str(path), "exec"), {"torch": torch})


@pytest.mark.parametrize("keep", [False, True])
@pytest.mark.parametrize("torch_imported", ["before", "after"])
def test_only_the_programs_own_compile_calls_are_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, keep: bool, torch_imported: str
) -> None:
    """Whether torch was imported before the run started (the warm runner) or by the
    program (an import hook patches it then)."""
    site = _fake_torch(tmp_path)
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setattr(sys, "meta_path", list(sys.meta_path))
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    if torch_imported == "before":
        importlib.import_module("torch")
    records = RunRecords()
    scope = UserCodeScope(ScopeConfig(root=str(tmp_path / "project")))
    CompileControl(scope=scope, records=records, keep=keep).install()
    torch = importlib.import_module("torch")
    assert torch.__file__ == str(site / "torch" / "__init__.py")
    calls = torch.calls
    torch.internal(len)  # torch compiling its own code: left alone, not the program's
    assert calls == [{"fullgraph": True}] and records.compile_mode is None
    _user_code(
        tmp_path,
        "def f(x):\n    return x\n"
        "g = torch.compile(f)\n"
        "h = torch.compile(mode='max-autotune')(f)\n"
        "k = torch.compile(f, disable=True)\n",
        torch,
    )
    changed = {} if keep else {"disable": True}
    assert calls[1:] == [changed, {"mode": "max-autotune", **changed}, {"disable": True}]
    assert records.compile_mode == ("compiled" if keep else "eager")
    assert [m for m in records.drain() if m["t"] == "compile"] == [
        {"t": "compile", "mode": records.compile_mode}
    ]


def test_the_compile_mode_is_read_from_older_traces_and_written_back() -> None:
    old = {
        "schema": "shapelens.trace/1",
        "argv": ["/p/a.py"],
        "python": "3.11.7",
        "duration_s": 0.5,
        "status": "ok",
        "exit_code": 0,
        "detail": None,
        "exception": None,
        "lines": [],
        "findings": [],
    }
    assert trace_from_json(old).compile_mode is None
    data = trace_to_json(trace_from_json({**old, "compile": "eager"}))
    assert data["compile"] == "eager"
    _validate(data)
    assert trace_from_json(data).compile_mode == "eager"


def test_the_language_server_setting() -> None:
    settings, problems = parse_settings({"shapelens": {"compile": True}})
    assert settings.run.keep_compile and not problems
    settings, problems = parse_settings({"compile": "yes"})
    assert not settings.run.keep_compile and problems == [
        "shapelens.compile: invalid value 'yes', using the default"
    ]
