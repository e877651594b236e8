"""``create_server()``, the entry point (``shapelens lsp``): the one place that wires the
handlers and the publisher to the server's state.

Imports point one way: server → handlers, commands, publish → state → runs, and handlers,
publish → features → results. Only the CLI imports this module."""

from __future__ import annotations

from shapelens.lsp.commands import COMMANDS
from shapelens.lsp.handlers import FEATURE_OPTIONS, FEATURES
from shapelens.lsp.publish import publish_cell, publish_file
from shapelens.lsp.state import ShapeLensServer


def create_server() -> ShapeLensServer:
    server = ShapeLensServer(publish=publish_file, publish_cell=publish_cell)
    for method, handler in FEATURES.items():
        server.feature(method, FEATURE_OPTIONS.get(method))(handler)
    for name, command in COMMANDS.items():
        server.command(name)(command)
    return server
