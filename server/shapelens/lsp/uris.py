"""File URIs ↔ real paths: results are keyed by real path, the client speaks in URIs."""

from __future__ import annotations

import os

from pygls.uris import from_fs_path, to_fs_path


def path_of(uri: str) -> str | None:
    """The real path of a ``file:`` URI (symlinks resolved: one file, one key), or None."""
    if not uri.startswith("file:"):
        return None
    path = to_fs_path(uri)
    return os.path.realpath(path) if path else None


def uri_of(path: str) -> str:
    return from_fs_path(path) or f"file://{path}"
