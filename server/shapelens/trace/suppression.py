"""``# shapelens: ignore[broadcast]`` on a line silences that line's findings of that kind.

``# shapelens: ignore`` silences every kind. Groups as in ``--no-findings``: ``mismatch``
covers ``device_mismatch`` and ``dtype_mismatch``, ``warnings`` covers ``library_warning``,
``degenerate`` covers ``degenerate_op``, ``shape_comments`` covers ``shape_comment``.
"""

from __future__ import annotations

import linecache
import re

_COMMENT = re.compile(r"#\s*shapelens:\s*ignore(?:\[([\w,\s]*)\])?")
_GROUPS = {
    "mismatch": ("device_mismatch", "dtype_mismatch", "shape_mismatch"),
    "warnings": ("library_warning",),
    "degenerate": ("degenerate_op",),
    "shape_comments": ("shape_comment",),
}


def suppressed(kind: str, file: str, line: int) -> bool:
    """Whether the source line of a finding asks to ignore findings of ``kind``."""
    found = _COMMENT.search(linecache.getline(file, line))
    if found is None:
        return False
    if found[1] is None:
        return True
    named = {name.strip() for name in found[1].split(",") if name.strip()}
    return any(kind == name or kind in _GROUPS.get(name, ()) for name in named)
