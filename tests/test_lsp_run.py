"""Language server end to end: run the seed's example 2, then hints, diagnostics, hover."""

from __future__ import annotations

import shutil

from lsprotocol import types

from conftest import EXAMPLES, TRACE_UPDATED, LspSession, line_of, need

need("torch")


async def test_example_2_hints_and_broadcast_diagnostic(lsp: LspSession) -> None:
    script = lsp.root / "seed_linear_fit.py"
    shutil.copy(EXAMPLES / "seed_linear_fit.py", script)
    uri = lsp.open(script)
    updated = lsp.client.protocol.wait_for_notification_async(TRACE_UPDATED)
    result = await lsp.run(uri)
    await updated

    assert result["status"] == "ok" and result["exitCode"] == 0
    assert result["findings"] == 1 and result["lines"] > 5
    hints = await lsp.hints(uri)
    pred_line = line_of(script, "pred = model(x)") - 1
    diff_line = line_of(script, "squared_diff =") - 1
    assert hints[pred_line] == "pred (4,1) grad"
    assert hints[diff_line] == "squared_diff (4,4)"
    [broadcast] = [d for d in lsp.client.diagnostics[uri] if d.code == "broadcast"]
    assert broadcast.range.start.line == diff_line
    assert broadcast.severity == types.DiagnosticSeverity.Warning
    assert broadcast.source == "shapelens"
    assert "(4, 4)" in broadcast.message
    # traceUpdated carries every line's label in one message per file: the final one, plus
    # at most one live snapshot a second while the run goes on
    updates = [u for u in lsp.trace_updates if u["uri"] == uri]
    assert 1 <= len(updates) <= result["durationS"] + 1
    update = updates[-1]
    labels = {entry["line"]: entry["label"] for entry in update["lines"]}
    assert labels[pred_line] == "pred (4,1) grad"
    assert lsp.refreshes == 0  # VS Code 1.65 capabilities have no inlayHint refreshSupport
    # the script's stdout (one loss per step) was forwarded as log messages, nothing else
    printed = [
        line
        for m in lsp.client.log_messages
        if m.type == types.MessageType.Log
        for line in m.message.splitlines()
    ]
    assert len(printed) == 10, printed
    assert all(float(line) > 0 for line in printed)

    hover = await lsp.client.text_document_hover_async(
        types.HoverParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            position=types.Position(
                diff_line, script.read_text().splitlines()[diff_line].index("pred")
            ),
        )
    )
    assert hover is not None
    text = hover.contents.value  # type: ignore[union-attr]
    assert "**pred**" in text and "`(4,1)`" in text and "`float32`" in text
    assert "AddmmBackward0" in text and "line 18" in text
    assert "broadcast" in text
