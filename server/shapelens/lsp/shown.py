"""A file as the client sees it, assembled once per publish or request and handed to the
features: the run's results placed on the open document, or on the text that ran."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pygls.workspace import TextDocument

from shapelens.lsp.results import FileView


@dataclass(frozen=True, kw_only=True)
class ShownFile:
    path: str
    uri: str
    """The URI the client uses when it has the file open, else a ``file:`` URI."""
    document: TextDocument | None
    """The open document; None when the client has not opened the file."""
    view: FileView | None
    """The results on ``lines``; None when the file has none."""
    lines: Sequence[str]
    """The document's lines, else the text that ran. Fetched once: ``TextDocument.lines``
    splits the whole source on every access."""
