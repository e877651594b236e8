"""Thin handlers, one per LSP method, taking the server first (as jedi-language-server's):
look up the document and its view, call the feature, answer. Results follow the text;
nothing here runs code (``lsp.commands`` does, on request)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from lsprotocol import types
from pygls.workspace import TextDocument

from shapelens.lsp.features.code_actions import FIX as COMMENT_FIX_KIND
from shapelens.lsp.features.code_actions import KIND as CODE_ACTION_KIND
from shapelens.lsp.features.code_actions import code_actions_for
from shapelens.lsp.features.code_lens import lenses_for
from shapelens.lsp.features.hover import hover_for
from shapelens.lsp.features.inlay_hints import hint_document, inlay_hints_for, resolve_hint
from shapelens.lsp.results import FileView
from shapelens.lsp.state import ShapeLensServer
from shapelens.lsp.uris import is_cell, path_of

PUBLISH_DELAY_S = 0.15


def initialize(ls: ShapeLensServer, params: types.InitializeParams) -> None:
    ls.apply_settings(params.initialization_options)


def initialized(ls: ShapeLensServer, params: types.InitializedParams) -> None:
    ls.start_watching()  # kernel traces, for notebooks


def shutdown(ls: ShapeLensServer, params: None) -> None:
    ls.stop_watching()
    ls.runs.close()  # the warm runner's fork server goes with us


def workspace_did_change_configuration(
    ls: ShapeLensServer, params: types.DidChangeConfigurationParams
) -> None:
    ls.apply_settings(params.settings)


def text_document_did_open(ls: ShapeLensServer, params: types.DidOpenTextDocumentParams) -> None:
    ls.refresh(params.text_document.uri)


def text_document_did_change(
    ls: ShapeLensServer, params: types.DidChangeTextDocumentParams
) -> None:
    ls.refresh_later(params.text_document.uri, PUBLISH_DELAY_S)


def workspace_did_change_watched_files(
    ls: ShapeLensServer, params: types.DidChangeWatchedFilesParams
) -> None:
    """Clients that watch ``kernel-*.json`` for us get a scan at once (polling goes on)."""
    if ls.has_cells():
        ls.scan_soon()


def notebook_document_did_open(
    ls: ShapeLensServer, params: types.DidOpenNotebookDocumentParams
) -> None:
    ls.publish_cells(ls.cell_uris(params.notebook_document.uri))
    ls.scan_soon()  # its folder's .shapelens/ may be new to us


def notebook_document_did_change(
    ls: ShapeLensServer, params: types.DidChangeNotebookDocumentParams
) -> None:
    closed = params.change.cells.structure if params.change.cells is not None else None
    if closed is not None and closed.did_close:
        ls.forget_cells(cell.uri for cell in closed.did_close)
    ls.refresh_cells_later(params.notebook_document.uri, PUBLISH_DELAY_S)


def notebook_document_did_save(
    ls: ShapeLensServer, params: types.DidSaveNotebookDocumentParams
) -> None:
    ls.scan_soon()


def notebook_document_did_close(
    ls: ShapeLensServer, params: types.DidCloseNotebookDocumentParams
) -> None:
    ls.forget_cells(cell.uri for cell in params.cell_text_documents)


def _shown(ls: ShapeLensServer, uri: str) -> tuple[FileView, TextDocument] | None:
    """The open document at ``uri`` and the results shown on it (None: either is missing)."""
    document = ls.open_document(uri)
    view = ls.view_of(document) if document is not None else None
    if document is None or view is None:
        return None
    return view, document


def text_document_hover(ls: ShapeLensServer, params: types.HoverParams) -> types.Hover | None:
    shown = _shown(ls, params.text_document.uri)
    return None if shown is None else hover_for(*shown, params.position)


def text_document_inlay_hint(
    ls: ShapeLensServer, params: types.InlayHintParams
) -> list[types.InlayHint]:
    shown = _shown(ls, params.text_document.uri)
    return (
        [] if shown is None else inlay_hints_for(*shown, params.range, ls.settings, ls.hint_cache)
    )


def inlay_hint_resolve(ls: ShapeLensServer, hint: types.InlayHint) -> types.InlayHint:
    document = ls.open_document(hint_document(hint))
    if document is None:
        return hint
    return resolve_hint(hint, document, ls.view_of(document))


def text_document_code_lens(
    ls: ShapeLensServer, params: types.CodeLensParams
) -> list[types.CodeLens]:
    document = ls.open_document(params.text_document.uri)
    if document is None or is_cell(document.uri):
        return []  # a cell runs in its kernel: no "Run with ShapeLens" there
    path = path_of(document.uri)
    modules = ls.results.modules_of(path) if path is not None else ()
    return lenses_for(document.source, document.uri, path, modules)


def text_document_code_action(
    ls: ShapeLensServer, params: types.CodeActionParams
) -> list[types.CodeAction]:
    shown = _shown(ls, params.text_document.uri)
    return [] if shown is None else code_actions_for(*shown, params.range, params.context.only)


FEATURES: dict[str, Callable[..., Any]] = {
    types.INITIALIZE: initialize,
    types.INITIALIZED: initialized,
    types.SHUTDOWN: shutdown,
    types.WORKSPACE_DID_CHANGE_CONFIGURATION: workspace_did_change_configuration,
    types.TEXT_DOCUMENT_DID_OPEN: text_document_did_open,
    types.TEXT_DOCUMENT_DID_CHANGE: text_document_did_change,
    types.WORKSPACE_DID_CHANGE_WATCHED_FILES: workspace_did_change_watched_files,
    types.NOTEBOOK_DOCUMENT_DID_OPEN: notebook_document_did_open,
    types.NOTEBOOK_DOCUMENT_DID_CHANGE: notebook_document_did_change,
    types.NOTEBOOK_DOCUMENT_DID_SAVE: notebook_document_did_save,
    types.NOTEBOOK_DOCUMENT_DID_CLOSE: notebook_document_did_close,
    types.TEXT_DOCUMENT_HOVER: text_document_hover,
    types.TEXT_DOCUMENT_INLAY_HINT: text_document_inlay_hint,
    types.INLAY_HINT_RESOLVE: inlay_hint_resolve,
    types.TEXT_DOCUMENT_CODE_LENS: text_document_code_lens,
    types.TEXT_DOCUMENT_CODE_ACTION: text_document_code_action,
}
"""LSP method → handler, registered by ``lsp.server.create_server``."""

FEATURE_OPTIONS: dict[str, Any] = {
    types.TEXT_DOCUMENT_CODE_ACTION: types.CodeActionOptions(
        code_action_kinds=[CODE_ACTION_KIND, COMMENT_FIX_KIND]
    ),
}
"""What a feature's capability declares beyond "supported" (by LSP method)."""
