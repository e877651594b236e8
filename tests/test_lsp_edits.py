"""Hints and diagnostics follow their lines through edits, never showing on a wrong line."""

from __future__ import annotations

from lsprotocol import types

from conftest import TRACE_UPDATED, LspSession

SOURCE = """
import numpy as np
a = np.ones((2, 2))
b = a * 3
c = b.sum(axis=0)
col = a[:, :1]
bad = c - col
"""
HINTS = {
    1: "a (2,2)",
    2: "b (2,2)",
    3: "c (2,)",
    4: "col (2,1)",
    5: "bad (2,2)",
}


def change(uri: str, version: int, start: tuple[int, int], end: tuple[int, int], text: str):  # type: ignore[no-untyped-def]
    return types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
        content_changes=[
            types.TextDocumentContentChangePartial(
                range=types.Range(types.Position(*start), types.Position(*end)), text=text
            )
        ],
    )


async def edit(lsp: LspSession, params: types.DidChangeTextDocumentParams) -> None:
    """Send an edit and wait until the server re-published for it (after its debounce)."""
    published = lsp.client.protocol.wait_for_notification_async(
        types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS
    )
    lsp.client.text_document_did_change(params)
    await published


def broadcast_lines(lsp: LspSession, uri: str) -> list[int]:
    return [
        d.range.start.line for d in lsp.client.diagnostics.get(uri, []) if d.code == "broadcast"
    ]


async def test_hints_move_with_their_lines(lsp: LspSession) -> None:
    path, uri = lsp.write("main.py", SOURCE)
    lsp.open(path)
    await lsp.run(uri)
    assert await lsp.hints(uri) == HINTS
    assert broadcast_lines(lsp, uri) == [5]

    # two lines inserted above: everything below moves down by two, in one notification
    updated = lsp.client.protocol.wait_for_notification_async(TRACE_UPDATED)
    lsp.client.text_document_did_change(change(uri, 2, (1, 0), (1, 0), "# one\n# two\n"))
    update = await updated
    assert {e.line: e.label for e in update.lines if e.label} == {
        k + 2: v for k, v in HINTS.items()
    }
    assert update.version == 2
    assert await lsp.hints(uri) == {k + 2: v for k, v in HINTS.items()}
    assert broadcast_lines(lsp, uri) == [7]

    # the `b` line is edited: its hint disappears at once, the others stay put
    lsp.client.text_document_did_change(change(uri, 3, (4, 8), (4, 9), "4"))  # no waiting
    expected = {k + 2: v for k, v in HINTS.items() if k != 2}
    assert await lsp.hints(uri) == expected

    # lines deleted above: hints and the diagnostic move up
    await edit(lsp, change(uri, 4, (1, 0), (3, 0), ""))
    assert await lsp.hints(uri) == {k: v for k, v in HINTS.items() if k != 2}
    assert broadcast_lines(lsp, uri) == [5]

    # the flagged line itself is edited: its diagnostic goes away rather than mislead
    await edit(lsp, change(uri, 5, (5, 0), (5, 3), "worse"))
    assert await lsp.hints(uri) == {
        1: "a (2,2)",
        3: "c (2,)",
        4: "col (2,1)",
    }
    assert broadcast_lines(lsp, uri) == []


async def test_tooltips_are_resolved_on_demand(lsp: LspSession) -> None:
    path, uri = lsp.write("main.py", SOURCE)
    lsp.open(path)
    await lsp.run(uri)
    hints = await lsp.client.text_document_inlay_hint_async(
        types.InlayHintParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            range=types.Range(types.Position(0, 0), types.Position(10, 0)),
        )
    )
    [b_hint] = [h for h in hints or [] if str(h.label).startswith("b ")]
    assert b_hint.tooltip is None  # not built for every hint up front
    resolved = await lsp.client.inlay_hint_resolve_async(b_hint)
    assert "**b** · `numpy.ndarray`" in resolved.tooltip.value  # type: ignore[union-attr]
    # after an edit the old hint resolves to nothing rather than to the wrong line
    lsp.client.text_document_did_change(change(uri, 2, (0, 0), (0, 0), "# top\n"))
    stale = await lsp.client.inlay_hint_resolve_async(b_hint)
    assert stale.tooltip is None
