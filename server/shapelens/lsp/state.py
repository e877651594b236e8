"""The ShapeLens language server's state: settings, results, runs, and the files as the
client sees them. It imports no feature and no handler: ``lsp.server`` wires those to it and
hands it ``publish`` (what to send about a file), so data flows one way."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import unquote

from lsprotocol import types
from pygls.lsp.server import LanguageServer
from pygls.workspace import TextDocument

from shapelens import __version__
from shapelens.lsp.kernel_traces import (
    POLL_INTERVAL_S,
    TRACE_DIR_ENV,
    KernelTraceFiles,
    read_kernel_trace,
    trace_dirs,
)
from shapelens.lsp.notebooks import NO_RESULTS, NotebookResults, outside_cells
from shapelens.lsp.protocol import ShapeLensProtocol
from shapelens.lsp.results import FileView, ResultStore
from shapelens.lsp.runs import RunManager, read_lines
from shapelens.lsp.settings import Settings, parse_settings
from shapelens.lsp.shown import ShownFile
from shapelens.lsp.uris import is_cell, notebook_path, path_of, uri_of
from shapelens.trace import Trace

Publish = Callable[["ShapeLensServer", str], None]
"""Sends the client one file's results (``lsp.publish.publish_file``), or one notebook
cell's (``lsp.publish.publish_cell``, given the cell's URI)."""


NOTEBOOK_SYNC = types.NotebookDocumentSyncOptions(
    notebook_selector=[
        types.NotebookDocumentFilterWithCells(
            notebook="*", cells=[types.NotebookCellLanguage(language="python")]
        )
    ],
    save=True,
)
"""Python cells of any notebook type (``jupyter-notebook``, ``interactive``, ...)."""


class ShapeLensServer(LanguageServer):
    """Holds the state; thin handlers in ``lsp.handlers`` and ``lsp.commands`` read it."""

    def __init__(self, publish: Publish, publish_cell: Publish | None = None) -> None:
        # Handlers that wait on the client must not starve the stdin reader (ENVIRONMENT.md).
        super().__init__(
            "shapelens",
            __version__,
            max_workers=4,
            notebook_document_sync=NOTEBOOK_SYNC,
            protocol_cls=ShapeLensProtocol,
        )
        self.settings = Settings()
        self.results = ResultStore()
        self.runs = RunManager(self)
        # features.inlay_hints.HintCache, spelled out: the state imports no feature.
        self.hint_cache: dict[tuple[object, ...], dict[int, types.InlayHint | None]] = {}
        self._publish = publish
        self._publish_cell = publish_cell
        self._pending: dict[str, asyncio.TimerHandle] = {}
        self.notebooks = NotebookResults()
        """Kernel traces (``%load_ext shapelens``) placed on the cells of open notebooks."""
        self._kernel_files = KernelTraceFiles()
        self._watch: asyncio.Task[None] | None = None
        self._scanning = asyncio.Lock()
        self._cells_shown: dict[str, tuple[object, ...]] = {}
        """Per cell URI: what its last publish showed (unchanged cells are not re-sent)."""

    def apply_settings(self, raw: Any) -> None:
        settings, problems = parse_settings(raw, self.settings)
        restyled = settings.hint_style != self.settings.hint_style
        moved = settings.notebooks.trace_dir != self.settings.notebooks.trace_dir
        self.settings = settings
        if restyled and self.results.paths():  # decorations carry their labels: resend
            self.publish(self.results.paths())
        if restyled:
            self.publish_cells()
        if moved:
            self.scan_soon()
        if problems:
            self.show_message(
                types.MessageType.Warning, "ShapeLens settings: " + "; ".join(problems)
            )

    # -- documents -------------------------------------------------------------------------
    def open_document(self, uri: str) -> TextDocument | None:
        """The open document for ``uri``, or ``None`` (unknown URIs get empty answers).
        Notebook cells are open documents too (pygls keys documents by unquoted URI)."""
        if unquote(uri) not in self.workspace.text_documents:
            return None
        return self.workspace.get_text_document(uri)

    def view_of(self, document: TextDocument) -> FileView | None:
        path = path_of(document.uri)
        if path is None:
            return self.cell_view(document)
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

    # -- notebooks -------------------------------------------------------------------------
    def python_cells(self, notebook: types.NotebookDocument) -> list[tuple[str, str]]:
        """``(uri, text)`` of the notebook's Python code cells, in notebook order."""
        cells = []
        for cell in notebook.cells:
            if cell.kind != types.NotebookCellKind.Code:
                continue
            document = self.workspace.text_documents.get(unquote(cell.document))
            if document is not None and document.language_id in ("python", None):
                cells.append((cell.document, document.source))
        return cells

    def cell_view(self, document: TextDocument) -> FileView | None:
        """The kernel execution this notebook cell shows, placed on its text; else None. A
        cell the client opened as a plain text document (no notebook sync) is placed alone."""
        notebook = self.workspace.get_notebook_document(cell_uri=document.uri)
        if notebook is not None:
            placed = self.notebooks.place(notebook.uri, self.python_cells(notebook))
        elif is_cell(document.uri):
            placed = self.notebooks.place(document.uri, [(document.uri, document.source)])
        else:
            return None
        execution = placed.get(document.uri)
        if execution is None:
            return None
        return self.notebooks.view(execution, document.lines)

    def cell_uris(self, notebook_uri: str | None = None) -> list[str]:
        """The Python cells of one open notebook, or of all of them (with the cells opened
        as plain text documents)."""
        notebooks = self.workspace.notebook_documents
        if notebook_uri is not None:
            one = notebooks.get(unquote(notebook_uri))
            return [uri for uri, _ in self.python_cells(one)] if one is not None else []
        found = [uri for notebook in notebooks.values() for uri, _ in self.python_cells(notebook)]
        for document in list(self.workspace.text_documents.values()):
            alone = self.workspace.get_notebook_document(cell_uri=document.uri) is None
            if alone and is_cell(document.uri) and document.language_id in ("python", None):
                found.append(document.uri)
        return found

    def publish_cells(self, uris: Iterable[str] | None = None) -> None:
        """Sends the results of each cell (of every open notebook by default) whose placed
        results changed since they were last sent, then asks for inlay hints again. A cell
        that showed nothing and still shows nothing gets no message."""
        if self._publish_cell is None:
            return
        sent = False
        for uri in self.cell_uris() if uris is None else uris:
            document = self.open_document(uri)
            if document is None:
                continue
            view = self.view_of(document)
            shown = (
                None
                if view is None
                else (
                    document.version,
                    hash(document.source),
                    view.results.run,
                    view.results.path,
                    self.settings.hint_style,
                )
            )
            if self._cells_shown.get(uri) == shown:
                continue
            if shown is None:
                self._cells_shown.pop(uri, None)
            else:
                self._cells_shown[uri] = shown
            self._publish_cell(self, uri)
            sent = True
        if sent and self.supports_inlay_refresh():
            self.workspace_inlay_hint_refresh(None)

    def refresh_cells_later(self, notebook_uri: str, delay_s: float) -> None:
        """``publish_cells`` for one notebook once typing pauses (like ``refresh_later``)."""
        key = "notebook:" + notebook_uri
        if key in self._pending:
            self._pending.pop(key).cancel()

        def refresh() -> None:
            self._pending.pop(key, None)
            self.publish_cells(self.cell_uris(notebook_uri))

        self._pending[key] = asyncio.get_running_loop().call_later(delay_s, refresh)

    def forget_cells(self, uris: Iterable[str]) -> None:
        """Closed cells: their diagnostics are withdrawn."""
        for uri in uris:
            if uri in self._cells_shown:
                del self._cells_shown[uri]
                self.text_document_publish_diagnostics(
                    types.PublishDiagnosticsParams(uri=uri, diagnostics=[])
                )

    # -- kernel traces -----------------------------------------------------------------------
    def kernel_trace_dirs(self) -> list[str]:
        """Where kernels write: see ``lsp.kernel_traces``."""
        notebook_dirs = []
        for uri in [*self.workspace.notebook_documents, *self.cell_uris()]:
            path = path_of(uri) or notebook_path(uri)
            if path is not None:
                notebook_dirs.append(os.path.dirname(path))
        return trace_dirs(
            self.workspace_roots(),
            notebook_dirs,
            os.environ.get(TRACE_DIR_ENV),
            self.settings.notebooks.trace_dir,
        )

    def has_cells(self) -> bool:
        """Whether any notebook, or any cell as a plain document, is open."""
        documents = self.workspace.text_documents
        return bool(self.workspace.notebook_documents) or any(map(is_cell, documents))

    def start_watching(self) -> None:
        """Polls the kernel trace folders while notebooks are open (idempotent)."""
        if self._watch is None or self._watch.done():
            self._watch = asyncio.get_running_loop().create_task(self._poll())

    def stop_watching(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
            self._watch = None

    def scan_soon(self) -> None:
        """A scan now rather than at the next poll (a notebook opened, a file changed)."""
        with contextlib.suppress(RuntimeError):  # no loop: the next poll will do
            asyncio.get_running_loop().create_task(self.scan_kernel_traces())

    async def _poll(self) -> None:
        while True:
            if self.has_cells():
                try:
                    await self.scan_kernel_traces()
                except Exception as err:
                    self.log_message(types.MessageType.Warning, f"kernel traces: {err!r}")
            await asyncio.sleep(POLL_INTERVAL_S)

    async def scan_kernel_traces(self) -> bool:
        """Loads new and rewritten kernel traces, forgets deleted ones; publishes the cells
        when anything changed. Reading a trace parses JSON: no user code runs."""
        async with self._scanning:
            found = self._kernel_files.scan(self.kernel_trace_dirs())
            changed = False
            for path in found.gone:
                changed |= self.notebooks.drop(path)
                self.show_results(NO_RESULTS, {}, owner=path)
            for path in found.changed:
                trace = await asyncio.to_thread(read_kernel_trace, path)
                if trace is None:
                    continue  # not (yet) a trace we can read: the last good one stays
                self.notebooks.load(path, trace)
                modules = outside_cells(trace)
                sources = await asyncio.to_thread(_read_sources, modules.files)
                self.show_results(modules, sources, owner=path)
                changed = True
            if changed:
                self.publish_cells()
            return changed

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
        elif path is None and is_cell(uri):  # a cell opened as a plain text document
            self.publish_cells([uri])

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


def _read_sources(paths: Iterable[str]) -> dict[str, tuple[str, ...]]:
    """The files' text as it is now (the kernel ran them; we only read them)."""
    return {path: read_lines(path) for path in paths}
