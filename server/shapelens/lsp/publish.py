"""Pushes a file's results to the client: diagnostics and the ``traceUpdated`` notification.

The file is placed on the client's text once (``ShapeLensServer.shown``) and handed to the
features; ``lsp.server`` gives this function to the server, which calls it after runs."""

from __future__ import annotations

from lsprotocol import types

from shapelens.lsp.features.diagnostics import diagnostics_for
from shapelens.lsp.features.trace_updates import trace_update_for
from shapelens.lsp.notifications import TRACE_UPDATED
from shapelens.lsp.state import ShapeLensServer


def publish_file(server: ShapeLensServer, path: str) -> None:
    """Diagnostics always (the Problems panel lists unopened files too); hints for open ones."""
    file = server.shown(path)
    server.text_document_publish_diagnostics(
        types.PublishDiagnosticsParams(
            uri=file.uri, diagnostics=diagnostics_for(file, server.shown)
        )
    )
    if file.document is not None:
        server.notify(
            TRACE_UPDATED, trace_update_for(file.view, file.document, server.settings.hint_style)
        )
