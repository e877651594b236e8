"""Pushes a file's results to the client: diagnostics and the ``traceUpdated`` notification.

The file is placed on the client's text once (``ShapeLensServer.shown``) and handed to the
features; ``lsp.server`` gives this function to the server, which calls it after runs."""

from __future__ import annotations

from collections.abc import Callable

from lsprotocol import types

from shapelens.lsp.features.diagnostics import diagnostics_for
from shapelens.lsp.features.trace_updates import trace_update_for
from shapelens.lsp.notifications import TRACE_UPDATED
from shapelens.lsp.shown import ShownFile
from shapelens.lsp.state import ShapeLensServer
from shapelens.lsp.uris import uri_of


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


def publish_cell(server: ShapeLensServer, uri: str) -> None:
    """A notebook cell's diagnostics and ``traceUpdated`` (the same payload as a file's, on
    the cell's URI), from the kernel execution placed on it (``ShapeLensServer.cell_view``)."""
    document = server.open_document(uri)
    if document is None:
        return
    view = server.view_of(document)
    lines = document.lines
    cell = ShownFile(
        path=view.results.path if view is not None else uri,
        uri=document.uri,
        document=document,
        view=view,
        lines=lines,
    )
    server.text_document_publish_diagnostics(
        types.PublishDiagnosticsParams(
            uri=document.uri, diagnostics=diagnostics_for(cell, _cells_of(server, document.uri))
        )
    )
    server.notify(TRACE_UPDATED, trace_update_for(view, document, server.settings.hint_style))


def _cells_of(server: ShapeLensServer, uri: str) -> Callable[[str], ShownFile]:
    """Where related information may point: the cells of the same notebook, by the name the
    kernel compiled them under; anything else is left out (no view: not pointed at)."""
    notebook = server.workspace.get_notebook_document(cell_uri=uri)
    cells: dict[str, ShownFile] = {}

    def shown(path: str) -> ShownFile:
        if notebook is not None and not cells:
            for cell_uri in server.cell_uris(notebook.uri):
                document = server.open_document(cell_uri)
                view = server.view_of(document) if document is not None else None
                if document is not None and view is not None:
                    cells[view.results.path] = ShownFile(
                        path=view.results.path, uri=document.uri, document=document,
                        view=view, lines=document.lines,
                    )  # fmt: skip
        found = cells.get(path)
        if found is not None:
            return found
        return ShownFile(path=path, uri=uri_of(path), document=None, view=None, lines=())

    return shown
