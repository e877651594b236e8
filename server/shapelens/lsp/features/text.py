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
    """From the first non-blank character to the end of the line, in client units."""
    text = line_text(lines, line)
    start = len(text) - len(text.lstrip())
    if document is None:
        return types.Range(types.Position(line, start), types.Position(line, len(text)))
    return types.Range(
        document.position_to_client_units(ServerTextPosition(line, start)),
        document.position_to_client_units(ServerTextPosition(line, len(text))),
    )


def end_of_line(document: TextDocument, line: int) -> types.Position:
    text = line_text(document.lines, line)
    return document.position_to_client_units(ServerTextPosition(line, len(text)))
