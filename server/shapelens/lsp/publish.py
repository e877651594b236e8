"""Pushes a file's results to the client: diagnostics and the ``traceUpdated`` notification."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lsprotocol import types

from shapelens.lsp.features.diagnostics import diagnostics_for
from shapelens.lsp.features.trace_updates import trace_update_for

if TYPE_CHECKING:
    from shapelens.lsp.server import ShapeLensServer


def publish_file(server: ShapeLensServer, path: str) -> None:
    """Diagnostics always (the Problems panel lists unopened files too); hints for open ones."""
    from shapelens.lsp.server import TRACE_UPDATED

    uri = server.uri_for_path(path)
    server.text_document_publish_diagnostics(
        types.PublishDiagnosticsParams(uri=uri, diagnostics=diagnostics_for(server, path))
    )
    document = server.document_for_path(path)
    if document is not None:
        server.protocol.notify(TRACE_UPDATED, trace_update_for(server, document))
