"""Document and configuration events: results follow the text (never re-running code)."""

from __future__ import annotations

import asyncio

from lsprotocol import types

from shapelens.lsp.publish import publish_file
from shapelens.lsp.server import ShapeLensServer

PUBLISH_DELAY_S = 0.15


def register(server: ShapeLensServer) -> None:
    @server.feature(types.INITIALIZE)
    def initialize(ls: ShapeLensServer, params: types.InitializeParams) -> None:
        ls.apply_settings(params.initialization_options)

    @server.feature(types.SHUTDOWN)
    def shutdown(ls: ShapeLensServer, params: None) -> None:
        ls.runs.close()  # the warm runner's fork server goes with us

    @server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
    def did_change_configuration(
        ls: ShapeLensServer, params: types.DidChangeConfigurationParams
    ) -> None:
        ls.apply_settings(params.settings)

    def refresh(ls: ShapeLensServer, uri: str) -> None:
        from shapelens.lsp.server import path_of

        path = path_of(uri)
        if path is not None and ls.results.get(path) is not None:
            publish_file(ls, path)

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: ShapeLensServer, params: types.DidOpenTextDocumentParams) -> None:
        refresh(ls, params.text_document.uri)

    pending: dict[str, asyncio.TimerHandle] = {}

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: ShapeLensServer, params: types.DidChangeTextDocumentParams) -> None:
        # Re-publish once typing pauses: a burst of keystrokes costs one update, not one each.
        # (Requests such as inlay hints always map the results onto the current text.)
        uri = params.text_document.uri
        if uri in pending:
            pending.pop(uri).cancel()

        def publish() -> None:
            pending.pop(uri, None)
            refresh(ls, uri)

        pending[uri] = asyncio.get_running_loop().call_later(PUBLISH_DELAY_S, publish)
