"""Maps the lines of the source a run saw onto the document as it is now.

Lines are matched by content with difflib: a hint follows its line when lines are inserted
or deleted above it, disappears when its own line is edited, and is never shown on a line
whose text differs from the one that ran.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence


def map_lines(ran: Sequence[str], current: Sequence[str]) -> dict[int, int]:
    """0-based line in ``ran`` → 0-based line in ``current``, for unchanged lines only."""
    if list(ran) == list(current):
        return {i: i for i in range(len(ran))}
    matcher = difflib.SequenceMatcher(None, _norm(ran), _norm(current), autojunk=False)
    mapping: dict[int, int] = {}
    for tag, a_start, a_end, b_start, _ in matcher.get_opcodes():
        if tag == "equal":
            for offset in range(a_end - a_start):
                mapping[a_start + offset] = b_start + offset
    return mapping


def _norm(lines: Sequence[str]) -> list[str]:
    return [line.rstrip("\r\n") for line in lines]
