"""The ``broadcast`` finding: an elementwise op whose result is larger than every operand.

``(y - pred)`` with y (4,) and pred (4, 1) gives (4, 4): y was silently treated as a row
and stretched. We flag an op when the result has more elements than each operand and
more dimensions than the smaller-rank operand (implicit rank extension did the
stretching). Ordinary broadcasts ((3, 4) * (4,), x + 1, explicit x[:, None] - x[None])
are not flagged. Operand shapes are read just before the statement runs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from shapelens.engine.findings.shapes import broadcast, fmt, numel
from shapelens.engine.source_map import Expr

ShapeOf = Callable[[tuple[str, ...]], "tuple[int, ...] | None"]


class Broadcast:
    __slots__ = ("left", "left_shape", "op", "result", "right", "right_shape", "text")

    def __init__(
        self,
        op: str,
        text: str,
        left: str,
        left_shape: Any,
        right: str,
        right_shape: Any,
        result: Any,
    ) -> None:
        self.op = op
        self.text = text
        self.left = left
        self.left_shape = left_shape
        self.right = right
        self.right_shape = right_shape
        self.result = result

    def message(self) -> str:
        return (
            f"broadcast: {self.left} {fmt(self.left_shape)} {self.op} {self.right} "
            f"{fmt(self.right_shape)} → {fmt(self.result)}; the result is larger than "
            f"both operands (in `{self.text}`)"
        )


def _label(expr: Expr) -> str:
    if expr[0] == "name":
        return "`" + ".".join(expr[1]) + "`"
    if expr[0] == "op":
        return f"`{expr[2]}`"
    return "scalar"


def find_broadcast(expr: Expr, shape_of: ShapeOf) -> Broadcast | None:
    """Evaluate shapes bottom-up; return the first suspicious broadcast, if any."""
    found: list[Broadcast] = []

    def evaluate(node: Expr) -> tuple[int, ...] | None:
        tag = node[0]
        if tag == "scalar":
            return ()
        if tag == "name":
            return shape_of(node[1])
        left = evaluate(node[3])
        right = evaluate(node[4])
        if left is None or right is None:
            return None
        result = broadcast(left, right)
        if result is None:
            return None
        size = numel(result)
        if (
            not found
            and min(len(left), len(right)) >= 1
            and len(result) > min(len(left), len(right))
            and size > numel(left)
            and size > numel(right)
        ):
            found.append(
                Broadcast(
                    str(node[1]),
                    str(node[2]),
                    _label(node[3]),
                    left,
                    _label(node[4]),
                    right,
                    result,
                )
            )
        return result

    evaluate(expr)
    return found[0] if found else None
