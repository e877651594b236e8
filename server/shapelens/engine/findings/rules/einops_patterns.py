"""What an einops pattern wanted of the tensor it was given, in words: which dim of the
tensor does not fit which part of the pattern (``rearrange(x, "b (h d) n -> b h d n", h=3)``
of a (2, 10, 5) tensor: dim 1 is 10, and h = 3 does not divide it). Read with einops' own
parser, from the call as it was made; never from its message."""

from __future__ import annotations

import math
import sys
from typing import Any

_ELLIPSIS = "…"


def pattern_advice(pattern: Any, shape: tuple[int, ...], lengths: dict[str, Any]) -> str | None:
    """Why the left side of ``pattern`` does not fit ``shape`` with the axis ``lengths``
    given, or None (einops not loaded, a pattern it cannot read, or no disagreement seen)."""
    parsing = sys.modules.get("einops.parsing")
    if parsing is None or not isinstance(pattern, str):
        return None
    left = pattern.split("->")[0].strip()
    try:
        groups = parsing.ParsedExpression(left).composition
    except Exception:
        return None
    if _ELLIPSIS in groups:
        before = groups.index(_ELLIPSIS)
        after = len(groups) - before - 1
        if len(shape) < before + after:
            return f"`{left}` needs at least {before + after} dims; the tensor has {len(shape)}"
        pairs = list(zip(groups[:before], shape[:before], strict=True))
        pairs += list(zip(groups[before + 1 :], shape[len(shape) - after :], strict=True))
        offset = {id(g): i for i, g in enumerate(groups[:before])}
        offset.update({id(g): len(shape) - after + i for i, g in enumerate(groups[before + 1 :])})
    else:
        if len(groups) != len(shape):
            return f"`{left}` names {len(groups)} dims; the tensor has {len(shape)}"
        pairs = list(zip(groups, shape, strict=True))
        offset = {id(g): i for i, g in enumerate(groups)}
    for group, size in pairs:
        said = _group_disagrees(group, size, lengths)
        if said is not None:
            return f"dim {offset[id(group)]} is {size}, {said}"
    return None


def _group_disagrees(group: list[Any], size: int, lengths: dict[str, Any]) -> str | None:
    known: list[tuple[str, int]] = []
    unknown = 0
    for axis in group:
        if isinstance(axis, str):
            value = lengths.get(axis)
            if isinstance(value, int):
                known.append((axis, value))
            else:
                unknown += 1
        else:  # an anonymous axis: a number written in the pattern
            known.append((str(axis.value), int(axis.value)))
    if not known:
        return None
    product = math.prod(value for _, value in known)
    text = " * ".join(f"{name}={value}" if not name.isdigit() else name for name, value in known)
    if unknown == 0 and product != size:
        return f"but ({' '.join(str(a) for a in group)}) is {text} = {product}"
    if unknown == 1 and size % product:
        return f"and {text} does not divide it"
    return None
