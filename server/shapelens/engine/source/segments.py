"""A node's source text, from a file's lines split once.

``ast.get_source_segment`` splits the whole source again on every call, in a Python loop
over its characters: 0.4 ms per call for an 86-line file, so a file's op sites (three texts
each) and its statements' texts cost time that grows with the square of its length.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence

_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")


def compiler_lines(source: str) -> tuple[str, ...]:
    """``source``'s lines as the compiler numbers them, ends kept: only ``\\r\\n``, ``\\r`` and
    ``\\n`` end a line (``str.splitlines`` also splits at a form feed)."""
    return tuple(_LINE.findall(source))


def segment(lines: Sequence[str], node: ast.AST) -> str | None:
    """What ``ast.get_source_segment`` gives (columns are UTF-8 byte offsets), or None for a
    node without a position."""
    first = getattr(node, "lineno", 0) - 1
    last, end = getattr(node, "end_lineno", None), getattr(node, "end_col_offset", None)
    start = getattr(node, "col_offset", 0)
    if last is None or end is None or not 0 <= first < last <= len(lines):
        return None
    last -= 1
    if first == last:
        return str(lines[first].encode()[start:end].decode())
    head = lines[first].encode()[start:].decode()
    tail = lines[last].encode()[:end].decode()
    return str(head + "".join(lines[first + 1 : last]) + tail)
