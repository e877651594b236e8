"""Re-running an unchanged file: every run's hints are that run's, never a previous one's."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities

from conftest import LspSession, line_of

# The text never changes, the shape does: the script counts its runs in a file next to it.
GROWING = """
from pathlib import Path
import numpy as np
counter = Path(__file__).with_name("runs.txt")
n = int(counter.read_text()) + 1 if counter.exists() else 1
counter.write_text(str(n))
x = np.zeros(n)
"""

# CPython may give a new object the id() of one just freed; in a busy server a new run's
# results land on the old ones' address only now and then. This server makes every id() in
# the language server's modules collide, so code that keys by id() fails on the second run.
SAME_IDS_SERVER = """
import sys
from shapelens.lsp.server import create_server
create_server()  # imports every feature module
for name, module in list(sys.modules.items()):
    if name.startswith("shapelens.lsp"):
        module.id = lambda obj: 0
from shapelens.cli.main import main
raise SystemExit(main(["lsp"]))
"""


@pytest_lsp.fixture(
    config=ClientServerConfig(server_command=[sys.executable, "-c", SAME_IDS_SERVER]),
)
async def same_ids_client(lsp_client: LanguageClient, tmp_path: Path) -> AsyncIterator[None]:
    await lsp_client.initialize_session(
        types.InitializeParams(
            capabilities=client_capabilities("visual-studio-code"),
            root_uri=tmp_path.as_uri(),
            initialization_options={"shapelens": {"timeout": 60}},
        )
    )
    yield
    await lsp_client.shutdown_session()


async def _rerun(lsp: LspSession, runs: int) -> None:
    path, uri = lsp.write("grow.py", GROWING)
    lsp.open(path)
    line = line_of(path, "x = np.zeros") - 1
    for n in range(1, runs + 1):
        assert (await lsp.run(uri))["status"] == "ok"
        hints = await lsp.hints(uri)
        assert hints.get(line) == f"x ({n},)", f"run {n}: {hints.get(line)!r}"


async def test_fifty_reruns_of_unchanged_text_show_each_runs_shape(lsp: LspSession) -> None:
    await _rerun(lsp, 50)


async def test_reruns_show_each_runs_shape_when_python_reuses_ids(
    same_ids_client: LanguageClient, tmp_path: Path
) -> None:
    await _rerun(LspSession(same_ids_client, tmp_path), 5)


async def test_a_hint_of_an_earlier_run_resolves_to_no_tooltip(lsp: LspSession) -> None:
    path, uri = lsp.write("grow.py", GROWING)
    lsp.open(path)
    await lsp.run(uri)
    found = await lsp.client.text_document_inlay_hint_async(
        types.InlayHintParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            range=types.Range(types.Position(0, 0), types.Position(20, 0)),
        )
    )
    [hint] = [h for h in found or [] if str(h.label).startswith("x ")]
    resolved = await lsp.client.inlay_hint_resolve_async(hint)
    assert "**x**" in resolved.tooltip.value  # type: ignore[union-attr]
    await lsp.run(uri)  # same text, new shape: the old label's tooltip would be this run's
    hint.tooltip = None
    stale = await lsp.client.inlay_hint_resolve_async(hint)
    assert stale.tooltip is None
