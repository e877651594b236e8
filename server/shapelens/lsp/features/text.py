"""Small helpers on document text and positions (UTF-16 on the wire)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from lsprotocol import types
from pygls.workspace import TextDocument
from pygls.workspace.position_codec import ServerTextPosition

IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z_0-9]*")


def line_text(lines: Sequence[str], line: int) -> str:
    return lines[line].rstrip("\r\n") if 0 <= line < len(lines) else ""


def line_range(lines: Sequence[str], line: int, document: TextDocument | None) -> types.Range:
    """From the first non-blank character to the end of the line, in client units.

    ``lines`` is the document's lines, fetched once by the caller: ``TextDocument.lines``
    splits the whole source on every access."""
    text = line_text(lines, line)
    start = len(text) - len(text.lstrip())
    if document is None:
        return types.Range(types.Position(line, start), types.Position(line, len(text)))
    codec = document.position_codec
    return types.Range(
        codec.position_to_client_units(lines, ServerTextPosition(line, start)),
        codec.position_to_client_units(lines, ServerTextPosition(line, len(text))),
    )


def end_of_line(document: TextDocument, lines: Sequence[str], line: int) -> types.Position:
    text = line_text(lines, line)
    return document.position_codec.position_to_client_units(
        lines, ServerTextPosition(line, len(text))
    )
