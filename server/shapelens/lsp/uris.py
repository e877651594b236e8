"""File URIs ↔ real paths: results are keyed by real path, the client speaks in URIs."""

from __future__ import annotations

import os
from urllib.parse import unquote, urlsplit

from pygls.uris import from_fs_path, to_fs_path


def path_of(uri: str) -> str | None:
    """The real path of a ``file:`` URI (symlinks resolved: one file, one key), or None."""
    if not uri.startswith("file:"):
        return None
    path = to_fs_path(uri)
    return os.path.realpath(path) if path else None


def uri_of(path: str) -> str:
    return from_fs_path(path) or f"file://{path}"


CELL_SCHEME = "vscode-notebook-cell"


def is_cell(uri: str) -> bool:
    """A notebook cell's URI (VS Code: ``vscode-notebook-cell:/path/nb.ipynb#W0sZmlsZQ==``)."""
    return uri.startswith(CELL_SCHEME + ":")


def notebook_path(cell_uri: str) -> str | None:
    """The notebook file a cell URI points into, or None."""
    if not is_cell(cell_uri):
        return None
    path = unquote(urlsplit(cell_uri).path)
    return os.path.realpath(path) if os.path.isabs(path) else None
