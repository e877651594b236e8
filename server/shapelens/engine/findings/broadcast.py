"""The ``broadcast`` finding: an elementwise op that silently made a matrix of two vectors.

``(y - pred)`` with y (4,) and pred (4, 1) gives (4, 4): y was treated as a row, pred as a
column, and every pair was subtracted. The rule (docs/findings.md):

- both operands are stretched (each gets a size-1 or missing dim blown up), so the result
  is larger than either: one-sided broadcasts, ``(3, 4) * (4,)``, ``x + 1``, are ordinary;
- and the stretched dims have the same size (``(N,1)`` against ``(N,)``: they were meant to
  line up), or the result is reduced to one number (a loss of a broadcast is always wrong);
- unless the author shaped an operand on purpose (``None`` index, ``unsqueeze``, ``view``,
  ``reshape``, ``expand``, a transpose) on that line or where the operand was born: then it
  is an intended outer product (``position * div_term``, ``x[:, None] - x[None]``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from shapelens.engine.findings.intent import NO_SHAPING, silences
from shapelens.engine.findings.shapes import broadcast, numel
from shapelens.engine.source_map import Candidate, Expr

ShapeOf = Callable[[tuple[str, ...]], "tuple[int, ...] | None"]
ShapingOf = Callable[[tuple[str, ...]], int]


def accidental(
    left: Sequence[int], right: Sequence[int], result: Sequence[int], *, reduced: bool
) -> bool:
    """Whether broadcasting ``left`` with ``right`` into ``result`` looks like the seed's bug
    (the author's shaping, if any, is checked by the caller)."""
    if not left or not right:
        return False
    size = numel(result)
    if size <= numel(left) or size <= numel(right):
        return False
    rank = len(result)
    a = (1,) * (rank - len(left)) + tuple(left)
    b = (1,) * (rank - len(right)) + tuple(right)
    stretched_a = [d for d in range(rank) if result[d] > 1 and a[d] == 1]
    stretched_b = [d for d in range(rank) if result[d] > 1 and b[d] == 1]
    if not stretched_a or not stretched_b:
        return False
    if reduced:
        return True
    return any(result[i] == result[j] for i in stretched_a for j in stretched_b)


class Broadcast:
    """One accidental broadcast, found on a line."""

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

    def to_data(
        self, file: str, line: int, operands: Sequence[dict[str, Any]] = ()
    ) -> dict[str, Any]:
        """The finding as trace data; ``operands`` may carry more facts (dtype, birth line)."""
        base = [
            {"name": name, "shape": list(shape), "dtype": None, "device": None,
             "requires_grad": None, "line": None}
            for name, shape in ((self.left, self.left_shape), (self.right, self.right_shape))
        ]  # fmt: skip
        return {
            "kind": "broadcast",
            "severity": "warning",
            "file": file,
            "line": line,
            "expression": self.text,
            "operands": [
                {**b, **extra} for b, extra in zip(base, [*operands, {}, {}], strict=False)
            ],
            "operator": self.op,
            "result_shape": list(self.result),
        }


def _label(expr: Expr) -> str:
    if expr[0] == "name":
        return ".".join(expr[1])
    if expr[0] == "op":
        return str(expr[2])
    return "scalar"


def _leaves(expr: Expr) -> list[tuple[str, ...]]:
    if expr[0] == "name":
        return [expr[1]]
    if expr[0] == "op":
        return _leaves(expr[3]) + _leaves(expr[4])
    return []


def find_broadcast(
    candidate: Candidate, shape_of: ShapeOf, shaping: ShapingOf = lambda path: NO_SHAPING
) -> Broadcast | None:
    """Evaluate shapes bottom-up; return the first accidental broadcast, if any.
    ``shaping(path)``: how the line where the value of ``path`` was born shaped it."""
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
        if (
            not found
            and accidental(left, right, result, reduced=candidate.reduced)
            and not silences(
                max((shaping(path) for path in _leaves(node)), default=NO_SHAPING),
                reduced=candidate.reduced,
            )
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

    evaluate(candidate.expr)
    return found[0] if found else None
