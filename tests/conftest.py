"""Shared helpers: run ``shapelens run`` the way a user does and read back its trace."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"


@dataclass
class Run:
    returncode: int
    stdout: str
    stderr: str
    trace: dict[str, Any] | None

    def line(self, file: Path | str, number: int) -> dict[str, Any] | None:
        assert self.trace is not None
        for entry in self.trace["lines"]:
            if entry["file"] == os.path.realpath(file) and entry["line"] == number:
                return entry
        return None

    def var(self, file: Path | str, number: int, name: str) -> dict[str, Any]:
        entry = self.line(file, number)
        assert entry is not None, f"line {number} was not traced"
        for var in entry["vars"]:
            if var["name"] == name:
                return var
        raise AssertionError(f"{name} not on line {number}: {[v['name'] for v in entry['vars']]}")

    def findings(self, kind: str) -> list[dict[str, Any]]:
        assert self.trace is not None
        return [f for f in self.trace["findings"] if f["kind"] == kind]


def run_cli(
    *args: str,
    cwd: Path,
    stdin: str | None = None,
    timeout: float = 120,
    env: dict[str, str] | None = None,
) -> Run:
    """``shapelens run --json TRACE ARGS`` in ``cwd``; the trace is read back when written."""
    trace_path = cwd / ".trace.json"
    if trace_path.exists():
        trace_path.unlink()
    command = [sys.executable, "-m", "shapelens", "run", "--json", str(trace_path), *args]
    process = subprocess.run(
        command,
        cwd=cwd,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )
    trace = json.loads(trace_path.read_text()) if trace_path.exists() else None
    return Run(process.returncode, process.stdout, process.stderr, trace)


@pytest.fixture
def script(tmp_path: Path):  # type: ignore[no-untyped-def]
    """Write a dedented script into a fresh project folder and return its path."""

    def write(source: str, name: str = "main.py") -> Path:
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(source).lstrip("\n"), encoding="utf-8")
        return path

    return write


def line_of(path: Path, marker: str) -> int:
    """1-based number of the first line starting with ``marker`` (tests name lines, not numbers)."""
    for number, text in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if text.strip().startswith(marker):
            return number
    raise AssertionError(f"{marker!r} not in {path}")
