"""LSP features, one module each; ``register_all`` wires them into a server."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from shapelens.lsp.server import ShapeLensServer


def register_all(server: ShapeLensServer) -> None:
    from shapelens.lsp.features import code_lens, commands, documents, hover, inlay_hints

    for feature in (documents, commands, inlay_hints, hover, code_lens):
        feature.register(server)
