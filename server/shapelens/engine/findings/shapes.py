"""Shape arithmetic on plain tuples (no torch needed)."""

from __future__ import annotations

from collections.abc import Sequence


def broadcast(a: Sequence[int], b: Sequence[int]) -> tuple[int, ...] | None:
    """numpy/torch broadcasting of two shapes; ``None`` when they are incompatible."""
    result: list[int] = []
    for i in range(1, max(len(a), len(b)) + 1):
        x = a[-i] if i <= len(a) else 1
        y = b[-i] if i <= len(b) else 1
        if x == y or y == 1:
            result.append(x)
        elif x == 1:
            result.append(y)
        else:
            return None
    return tuple(reversed(result))


def numel(shape: Sequence[int]) -> int:
    count = 1
    for dim in shape:
        count *= dim
    return count
