"""``shapelens doctor``: the interpreter a run would use, its torch, its tracing core and why
the gate is off; an interpreter that cannot be used is one line and a non-zero status."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types

from conftest import REPO, LspSession, run_cli

ON_311 = sys.implementation.name == "cpython" and sys.version_info[:2] == (3, 11)
PYTHON_312 = Path(sys.prefix).parent / ".venv312" / "bin" / "python"
"""Next to the venv running the tests, as the Makefile makes them."""
PYTHON_39 = Path(os.path.expanduser("~/.pyenv/versions/3.9.18/bin/python"))


def _doctor(*args: str, env: dict[str, str] | None = None, cwd: Path = REPO) -> Any:
    return subprocess.run(
        [sys.executable, "-m", "shapelens", "doctor", *args],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=cwd,
        env={**os.environ, **(env or {})},
    )


def _diagnosis(*args: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    done = _doctor("--json", *args, env=env)
    assert done.returncode == 0, done.stderr
    found: dict[str, Any] = json.loads(done.stdout)
    return found


@pytest.mark.skipif(not ON_311, reason="the gate is built on CPython 3.11 only")
def test_the_report_on_this_interpreter_with_the_gate(tmp_path: Path) -> None:
    done = _doctor("--trace-dir", str(tmp_path / "traces"))
    assert done.returncode == 0, done.stderr
    lines = dict(line.split(None, 1) for line in done.stdout.splitlines() if "  " in line)
    import torch

    assert lines["interpreter"].strip() == sys.executable
    assert lines["torch"].startswith(f"{torch.__version__}, CUDA")
    assert "tracing core  gate (" in done.stdout
    assert "debugpy " in done.stdout and "ipykernel " in done.stdout
    assert f"{tmp_path / 'traces'}: writable (created on first use)" in done.stdout


@pytest.mark.skipif(not ON_311, reason="the gate is built on CPython 3.11 only")
def test_the_gate_switched_off_says_so() -> None:
    found = _diagnosis(env={"SHAPELENS_LIBRARY_GATE": "0"})
    tracing = found["interpreter"]["tracing"]
    assert tracing == {"core": "settrace", "gate_off": "SHAPELENS_LIBRARY_GATE=0 is set"}


def test_a_run_records_the_core_doctor_names(script, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The trace says which core ran, as ``doctor`` says a run here would get, with the gate
    and without it."""
    script("import torch\nx = torch.ones(2)\n")
    for env in ({}, {"SHAPELENS_LIBRARY_GATE": "0"}):
        expected = _diagnosis(env=env)["interpreter"]["tracing"]
        run = run_cli("main.py", cwd=tmp_path, env=env)
        assert run.trace is not None and run.returncode == 0, run.stderr
        recorded = run.trace["tracing"]
        assert recorded == {k: v for k, v in expected.items() if v is not None}
    core = "gate" if ON_311 else "monitoring" if sys.version_info >= (3, 12) else "settrace"
    assert run_cli("main.py", cwd=tmp_path).trace["tracing"]["core"] == core  # type: ignore[index]


def _package_copy(tmp_path: Path) -> Path:
    """This package without its compiled gate, as the VS Code extension bundles it."""
    package = tmp_path / "shapelens"
    shutil.copytree(
        REPO / "server" / "shapelens", package, ignore=shutil.ignore_patterns("*.so", "__pycache__")
    )
    return package


def _doctor_of_copy(tmp_path: Path) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "shapelens", "doctor"],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.skipif(not ON_311, reason="the gate is built on CPython 3.11 only")
def test_a_copy_without_the_gate_says_so(tmp_path: Path) -> None:
    _package_copy(tmp_path)
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    assert (
        "tracing core  settrace (plain sys.settrace, slower); gate off: not built for this "
        f"interpreter (no _library_gate{suffix}: pip found no C compiler at install, or this "
        "copy ships without it, as the VS Code extension's does)"
    ) in _doctor_of_copy(tmp_path)


@pytest.mark.skipif(not ON_311 or shutil.which("cc") is None, reason="CPython 3.11 and cc")
def test_a_gate_built_for_another_python_is_never_loaded(tmp_path: Path) -> None:
    """A copy of the package whose gate says it was built for CPython 3.11.0: this 3.11
    does not load it, traces with plain sys.settrace and says why."""
    package = _package_copy(tmp_path)
    gate = (
        package / "engine" / "backends" / f"_library_gate{sysconfig.get_config_var('EXT_SUFFIX')}"
    )
    built_for = 0x030B00F0 if sys.version_info[:3] != (3, 11, 0) else 0x030B01F0
    subprocess.run(
        [
            "cc",
            "-shared",
            "-fPIC",
            f"-DGATE_BUILT_FOR={built_for:#x}",
            f"-I{sysconfig.get_paths()['include']}",
            str(package / "engine" / "backends" / "_library_gate.c"),
            "-o",
            str(gate),
        ],
        check=True,
        timeout=120,
    )
    report = _doctor_of_copy(tmp_path)
    this = sys.version.split()[0]
    built = "3.11.0" if built_for == 0x030B00F0 else "3.11.1"
    assert (
        "tracing core  settrace (plain sys.settrace, slower); gate off: "
        f"the gate was built for CPython {built}, this is {this}"
    ) in report


@pytest.mark.skipif(not PYTHON_312.exists(), reason="needs the 3.12 venv (make test makes it)")
def test_another_interpreter_is_asked_in_its_own_process() -> None:
    found = _diagnosis("--python", str(PYTHON_312))["interpreter"]
    assert found["python"].startswith("3.12.")
    assert found["executable"] == str(PYTHON_312)
    assert found["tracing"] == {"core": "monitoring", "gate_off": None}


def test_a_missing_interpreter_is_one_line_and_status_1(tmp_path: Path) -> None:
    done = _doctor("--python", str(tmp_path / "nope" / "python"))
    assert done.returncode == 1
    assert done.stdout == ""
    missing = tmp_path / "nope" / "python"
    assert done.stderr == f"shapelens doctor: Python interpreter not found: {missing}\n"


@pytest.mark.skipif(not PYTHON_39.exists(), reason="needs pyenv's 3.9.18")
def test_a_too_old_interpreter_is_one_line_and_status_1() -> None:
    done = _doctor("--python", str(PYTHON_39))
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        f"shapelens doctor: {PYTHON_39} is Python 3.9.18: ShapeLens runs programs on Python "
        "3.10 or newer (choose another with --python, or the extension's shapelens.interpreter "
        "setting)"
    ]


async def test_the_language_server_reports_with_the_editor_settings(lsp: LspSession) -> None:
    """What "ShapeLens: Show Diagnostics Report" shows: the report for the interpreter the
    server's runs use, with the settings the editor sends."""
    settings = {"interpreter": "", "timeout": 60, "findings": {"broadcast": True}}
    result = await lsp.client.workspace_execute_command_async(
        types.ExecuteCommandParams(command="shapelens.doctor", arguments=[{"settings": settings}])
    )
    assert result["diagnosis"]["interpreter"]["executable"] == sys.executable
    assert result["diagnosis"]["settings"] == settings
    report = result["report"]
    assert f"interpreter   {sys.executable}\n" in report
    assert f"trace folder  {lsp.root / '.shapelens'}: writable (created on first use)" in report
    assert 'settings (effective shapelens.*):\n  {\n    "findings": {' in report
