"""stdin: a terminal run keeps the terminal's; a run the language server starts (cold, warm,
distributed) reads an empty one, never the server's own stdin (its JSON-RPC stream)."""

from __future__ import annotations

import asyncio
import re
import time
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types

from conftest import LspSession, line_of, need, run_cli

ASK = """
import os
print("parent", os.getppid(), flush=True)
name = input("name? ")
print("hello", name)
"""


def test_cli_passes_the_terminal_stdin_through(script, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    script(ASK)
    run = run_cli("main.py", cwd=tmp_path, stdin="alice\n")
    assert run.returncode == 0, run.stderr
    assert "name? hello alice" in run.stdout
    assert run.trace is not None and run.trace["status"] == "ok"


def _exception(lsp: LspSession, uri: str) -> types.Diagnostic:
    found = [d for d in lsp.client.diagnostics[uri] if d.code == "exception"]
    assert len(found) == 1, lsp.client.diagnostics[uri]
    return found[0]


async def _ask(lsp: LspSession, uri: str, **extra: Any) -> tuple[dict[str, Any], int]:
    """Run the script; its result and the pid of the process that started it."""
    before = len(lsp.client.log_messages)
    # A run reading the server's stdin would wait there until the run's time limit.
    result = await asyncio.wait_for(lsp.run(uri, **extra), 50)
    # Ranks share the output: one rank's "parent <pid>" may follow another's "name? " prompt
    # on its line, or be split from its pid across messages.
    output = "\n".join(m.message for m in lsp.client.log_messages[before:])
    parents = re.findall(r"parent\s+(\d+)", output)
    assert parents, output
    return result, int(parents[-1])


async def test_cold_and_warm_runs_read_an_empty_stdin(lsp_cold: LspSession) -> None:
    lsp = lsp_cold
    path, uri = lsp.write("ask.py", ASK)
    lsp.open(path)

    def ended_at_input(result: dict[str, Any]) -> None:
        assert result["status"] == "exception", result
        exception = _exception(lsp, uri)
        assert exception.range.start.line == line_of(path, "name =") - 1
        assert exception.message.startswith("EOFError: EOF when reading a line")

    result, cold_parent = await _ask(lsp, uri)  # cold: it starts the fork server
    ended_at_input(result)
    deadline = time.monotonic() + 120
    while True:  # later runs fork from the fork server once it is ready
        result, parent = await _ask(lsp, uri)
        ended_at_input(result)
        if parent != cold_parent:
            break
        if time.monotonic() > deadline:
            pytest.fail("no run was forked from the warm runner")
    # the server still answers
    path2, uri2 = lsp.write("ok.py", "import numpy as np\nv = np.ones(3)\n")
    lsp.open(path2)
    assert (await lsp.run(uri2))["status"] == "ok"
    assert (await lsp.hints(uri2))[1] == "v (3,)"


async def test_distributed_ranks_read_an_empty_stdin(lsp: LspSession) -> None:
    need("torch")
    path, uri = lsp.write("ask.py", ASK)
    lsp.open(path)
    result, _ = await _ask(lsp, uri, nprocPerNode=2)
    assert result["status"] == "exception", result
    exception = _exception(lsp, uri)
    assert exception.range.start.line == line_of(path, "name =") - 1
    assert exception.message.startswith("EOFError: [rank ")
    path2, uri2 = lsp.write("ok.py", "import numpy as np\nv = np.ones(3)\n")
    lsp.open(path2)
    assert (await lsp.run(uri2))["status"] == "ok"
