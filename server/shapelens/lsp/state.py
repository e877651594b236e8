"""The ShapeLens language server's state: settings, results, runs, and the files as the
client sees them. It imports no feature and no handler: ``lsp.server`` wires those to it and
hands it ``publish`` (what to send about a file), so data flows one way."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from typing import Any

from lsprotocol import types
from pygls.lsp.server import LanguageServer
from pygls.workspace import TextDocument

from shapelens import __version__
from shapelens.lsp.results import FileView, ResultStore
from shapelens.lsp.runs import RunManager
from shapelens.lsp.settings import Settings, parse_settings
from shapelens.lsp.shown import ShownFile
from shapelens.lsp.uris import path_of, uri_of
from shapelens.trace import Trace

Publish = Callable[["ShapeLensServer", str], None]
"""Sends the client one file's results (``lsp.publish.publish_file``)."""


class ShapeLensServer(LanguageServer):
    """Holds the state; thin handlers in ``lsp.handlers`` and ``lsp.commands`` read it."""

    def __init__(self, publish: Publish) -> None:
        # Handlers that wait on the client must not starve the stdin reader (ENVIRONMENT.md).
        super().__init__("shapelens", __version__, max_workers=4)
        self.settings = Settings()
        self.results = ResultStore()
        self.runs = RunManager(self)
        # features.inlay_hints.HintCache, spelled out: the state imports no feature.
        self.hint_cache: dict[tuple[object, ...], dict[int, types.InlayHint | None]] = {}
        self._publish = publish
        self._pending: dict[str, asyncio.TimerHandle] = {}

    def apply_settings(self, raw: Any) -> None:
        settings, problems = parse_settings(raw, self.settings)
        restyled = settings.hint_style != self.settings.hint_style
        self.settings = settings
        if restyled and self.results.paths():  # decorations carry their labels: resend
            self.publish(self.results.paths())
        if problems:
            self.show_message(
                types.MessageType.Warning, "ShapeLens settings: " + "; ".join(problems)
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

    def shown(self, path: str) -> ShownFile:
        """``path`` as the client sees it: its open document (under the client's URI), else
        the text that ran, with the results placed on it."""
        document = self.document_for_path(path)
        if document is not None:
            lines = document.lines
            view = self.results.view(path, document.version, lines)
            return ShownFile(path=path, uri=document.uri, document=document, view=view, lines=lines)
        results = self.results.get(path)
        view = self.results.view(path, -1, results.source) if results is not None else None
        lines = results.source if results is not None else ()
        return ShownFile(path=path, uri=uri_of(path), document=None, view=view, lines=lines)

    def workspace_roots(self) -> list[str]:
        roots = (path_of(folder.uri) for folder in self.workspace.folders.values())
        return [root for root in roots if root]

    # -- publishing ------------------------------------------------------------------------
    def publish(self, paths: Iterable[str]) -> None:
        """Sends each file's results, then asks the client to fetch inlay hints again."""
        for path in paths:
            self._publish(self, path)
        if self.supports_inlay_refresh():
            self.workspace_inlay_hint_refresh(None)

    def show_results(self, trace: Trace, sources: dict[str, tuple[str, ...]], owner: str) -> None:
        """Stores what ``owner``'s run (or loaded trace) left, and shows it."""
        self.publish(self.results.update(trace, sources, owner=owner))

    def refresh(self, uri: str) -> None:
        """Re-sends a file's results placed on its current text (after an open or edits)."""
        path = path_of(uri)
        if path is not None and self.results.get(path) is not None:
            self._publish(self, path)

    def refresh_later(self, uri: str, delay_s: float) -> None:
        """Refreshes once typing pauses: a burst of keystrokes costs one update, not one each.
        (Requests such as inlay hints always map the results onto the current text.)"""
        if uri in self._pending:
            self._pending.pop(uri).cancel()

        def refresh() -> None:
            self._pending.pop(uri, None)
            self.refresh(uri)

        self._pending[uri] = asyncio.get_running_loop().call_later(delay_s, refresh)

    # -- messages to the client ------------------------------------------------------------
    def notify(self, method: str, params: Any) -> None:
        self.protocol.notify(method, params)

    def show_message(self, kind: types.MessageType, text: str) -> None:
        self.window_show_message(types.ShowMessageParams(type=kind, message=text))

    def log_message(self, kind: types.MessageType, text: str) -> None:
        self.window_log_message(types.LogMessageParams(type=kind, message=text))

    # -- client capabilities ---------------------------------------------------------------
    def supports_inlay_refresh(self) -> bool:
        workspace = self.client_capabilities.workspace
        hints = workspace.inlay_hint if workspace else None
        return bool(hints and hints.refresh_support)

    def supports_progress(self) -> bool:
        window = self.client_capabilities.window
        return bool(window and window.work_done_progress)
