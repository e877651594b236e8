"""The user's interpreter: Python 3.10 runs the traced child (sys.settrace, no gate); an
older one, or one that dies before ShapeLens starts in it, is one clear error line and a
non-zero status, never an ``ok``."""

from __future__ import annotations

import ast
import os
from pathlib import Path

import pytest
from lsprotocol import types

from conftest import REPO, LspSession, run_cli

PYENV = Path(os.path.expanduser("~/.pyenv/versions"))
PYTHON_310 = PYENV / "3.10.13" / "bin" / "python"
PYTHON_39 = PYENV / "3.9.18" / "bin" / "python"
RUNNER = REPO / "server" / "shapelens" / "runner"

PROGRAM = """\
def total(values):
    acc = 0
    for value in values:
        acc = acc + value
    return acc

result = total([1, 2, 3])
"""


@pytest.mark.skipif(not PYTHON_310.exists(), reason="needs pyenv's 3.10.13")
def test_a_310_child_traces_lines(tmp_path: Path) -> None:
    (tmp_path / "main.py").write_text(PROGRAM)
    run = run_cli("--python", str(PYTHON_310), "main.py", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert run.trace is not None and run.trace["python"].startswith("3.10.")
    assert run.var(tmp_path / "main.py", 7, "result")["name"] == "result"
    assert run.line(tmp_path / "main.py", 4)["hits"] == 3  # type: ignore[index]


@pytest.mark.skipif(not PYTHON_310.exists(), reason="needs pyenv's 3.10.13")
async def test_the_editor_runs_a_310_project_from_a_311_server(lsp: LspSession) -> None:
    """A project whose interpreter is 3.10: the server runs on 3.11+ (the extension's
    shapelens.serverInterpreter), the runs in the project's 3.10 (shapelens.interpreter)."""
    path, _ = lsp.write("main.py", "import sys\nminor = sys.version_info.minor\n" + PROGRAM)
    uri = lsp.open(path)
    lsp.client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(settings={"shapelens": {"interpreter": str(PYTHON_310)}})
    )
    for _ in range(2):  # cold, then (once its fork server is up) maybe forked: both on 3.10
        result = await lsp.run(uri)
        assert result["status"] == "ok", result
        hints = await lsp.hints(uri)
        assert hints[1] == "minor=10", hints  # 0-based lines
        assert hints[8] == "result=6", hints


@pytest.mark.skipif(not PYTHON_39.exists(), reason="needs pyenv's 3.9.18")
def test_an_interpreter_older_than_310_is_one_line_and_status_2(tmp_path: Path) -> None:
    (tmp_path / "main.py").write_text(PROGRAM)
    run = run_cli("--python", str(PYTHON_39), "main.py", cwd=tmp_path)
    assert run.returncode == 2
    assert run.stderr.splitlines() == [
        f"shapelens: {PYTHON_39} is older than Python 3.10: ShapeLens runs programs on Python "
        "3.10 or newer (choose another with --python, or the extension's shapelens.interpreter "
        "setting)"
    ]


def test_a_child_that_dies_before_hello_is_an_error(tmp_path: Path) -> None:
    """An interpreter that never starts ShapeLens (here one that exits at once): the run is
    an error with the interpreter's status, not "ok, 0 lines traced"."""
    broken = tmp_path / "python"
    broken.write_text("#!/bin/sh\necho 'ImportError: broken installation' >&2\nexit 1\n")
    broken.chmod(0o755)
    (tmp_path / "main.py").write_text(PROGRAM)
    run = run_cli("--python", str(broken), "main.py", cwd=tmp_path)
    assert run.returncode == 2
    assert "ok" not in run.stderr.split()
    assert run.stderr.splitlines()[-1] == (
        f"shapelens: {broken} exited with status 1 before ShapeLens could start in it "
        "(its error output says why)"
    )


def test_the_bootstrap_and_the_doctor_agree_on_the_oldest_python() -> None:
    def minimum(path: Path) -> object:
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "MINIMUM":
                return ast.literal_eval(node.value)
        return None

    assert minimum(RUNNER / "_bootstrap.py") == minimum(RUNNER / "probe.py") == (3, 10)
