"""The ShapeLens language server: state (settings, results, runs) and feature wiring."""

from __future__ import annotations

import os
from typing import Any

from lsprotocol import types
from pygls.lsp.server import LanguageServer
from pygls.uris import from_fs_path, to_fs_path
from pygls.workspace import TextDocument

from shapelens import __version__
from shapelens.lsp.results import FileView, ResultStore
from shapelens.lsp.settings import Settings, parse_settings

TRACE_UPDATED = "shapelens/traceUpdated"
DEBUG_LISTENING = "shapelens/debugListening"


class ShapeLensServer(LanguageServer):
    """Holds the server's state; handlers live in ``shapelens.lsp.features``."""

    def __init__(self) -> None:
        # Handlers that wait on the client must not starve the stdin reader (ENVIRONMENT.md).
        super().__init__("shapelens", __version__, max_workers=4)
        from shapelens.lsp.runs import RunManager

        self.settings = Settings()
        self.results = ResultStore()
        self.runs = RunManager(self)

    # -- settings --------------------------------------------------------------------------
    def apply_settings(self, raw: Any) -> None:
        settings, problems = parse_settings(raw, self.settings)
        self.settings = settings
        if problems:
            self.window_show_message(
                types.ShowMessageParams(
                    type=types.MessageType.Warning,
                    message="ShapeLens settings: " + "; ".join(problems),
                )
            )

    # -- documents -------------------------------------------------------------------------
    def open_document(self, uri: str) -> TextDocument | None:
        """The open document for ``uri``, or ``None`` (unknown URIs get empty answers)."""
        if uri not in self.workspace.text_documents:
            return None
        return self.workspace.get_text_document(uri)

    def view_of(self, document: TextDocument) -> FileView | None:
        path = path_of(document.uri)
        if path is None:
            return None
        return self.results.view(path, document.version, document.lines)

    def document_for_path(self, path: str) -> TextDocument | None:
        for uri in list(self.workspace.text_documents):
            if path_of(uri) == path:
                return self.workspace.get_text_document(uri)
        return None

    def uri_for_path(self, path: str) -> str:
        """The URI the client uses for ``path`` when it has it open, else a file URI."""
        document = self.document_for_path(path)
        return document.uri if document is not None else uri_of(path)

    def view_of_path(self, path: str) -> FileView | None:
        """The results of ``path`` placed on its open document, or on the text that ran."""
        document = self.document_for_path(path)
        if document is not None:
            return self.view_of(document)
        results = self.results.get(path)
        if results is None:
            return None
        return self.results.view(path, -1, results.source)

    # -- client capabilities ---------------------------------------------------------------
    def supports_inlay_refresh(self) -> bool:
        workspace = self.client_capabilities.workspace
        hints = workspace.inlay_hint if workspace else None
        return bool(hints and hints.refresh_support)

    def supports_progress(self) -> bool:
        window = self.client_capabilities.window
        return bool(window and window.work_done_progress)


def path_of(uri: str) -> str | None:
    if not uri.startswith("file:"):
        return None
    path = to_fs_path(uri)
    return os.path.realpath(path) if path else None


def uri_of(path: str) -> str:
    return from_fs_path(path) or f"file://{path}"


def create_server() -> ShapeLensServer:
    from shapelens.lsp.features import register_all

    server = ShapeLensServer()
    register_all(server)
    return server
