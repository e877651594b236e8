"""Finding what the trace knows about a name at a place in a file."""

from __future__ import annotations

from shapelens.lsp.results import FileView
from shapelens.trace import TracedVar


def binding_near(view: FileView, name: str, line: int) -> tuple[int, TracedVar] | None:
    """The binding of ``name`` (or its container entries) on ``line``, else the nearest one
    above it (the value the line used), else the first one below (0-based current lines)."""
    candidates: list[tuple[int, TracedVar]] = []
    for current, traced in view.lines.items():
        for var in traced.vars:
            if var.name == name or var.name.startswith((name + "[", name + ".")):
                candidates.append((current, var))
                break
    if not candidates:
        return None
    same = [c for c in candidates if c[0] == line]
    above = [c for c in candidates if c[0] < line]
    below = [c for c in candidates if c[0] > line]
    if same:
        return same[0]
    if above:
        return max(above, key=lambda c: c[0])
    return min(below, key=lambda c: c[0])
