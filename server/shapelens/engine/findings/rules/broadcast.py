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

import ast
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from shapelens.engine.findings.context import Resolve, RunFacts, load_paths, resolver, shape_of
from shapelens.engine.findings.events import OperatorRan, StatementChecked
from shapelens.engine.findings.rule import Rule
from shapelens.engine.findings.shapes import broadcast, numel
from shapelens.engine.source.intent import KEEPDIM, NO_SHAPING, line_shaping, silences
from shapelens.engine.source.source_map import Candidate, Expr
from shapelens.trace.finding import Finding, Operand

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
    """One accidental broadcast, found on a line: the operator, its text, each operand's
    label and shape, and the shape they broadcast to."""

    __slots__ = ("left", "left_shape", "op", "result", "right", "right_shape", "text")

    def __init__(
        self,
        *,
        op: str,
        text: str,
        left: str,
        left_shape: tuple[int, ...],
        right: str,
        right_shape: tuple[int, ...],
        result: tuple[int, ...],
    ) -> None:
        self.op = op
        self.text = text
        self.left = left
        self.left_shape = left_shape
        self.right = right
        self.right_shape = right_shape
        self.result = result


class BroadcastRule(Rule[StatementChecked | OperatorRan]):
    """``broadcast``: both operands of an elementwise op stretched (see the module's doc).
    One finding per line: a line found is no longer watched (``info.broadcast_lines``)."""

    kinds = ("broadcast",)
    events = (StatementChecked, OperatorRan)
    setting = "broadcast"

    def __init__(self, facts: RunFacts) -> None:
        super().__init__(facts)
        self._reported: set[tuple[str, int]] = set()

    def observe(self, seen: StatementChecked | OperatorRan, /) -> list[Finding]:
        info, line = seen.info, seen.line
        if line not in info.broadcast_lines or (info.file, line) in self._reported:
            return []  # reported already (by another code object of the line, too)
        if isinstance(seen, StatementChecked):
            found = self._in_expressions(seen) if info.elementwise.get(line) else []
        else:
            found = self._in_op(seen)
        if found:
            info.broadcast_lines.discard(line)
            self._reported.add((info.file, line))
        return found

    def _in_expressions(self, seen: StatementChecked) -> list[Finding]:
        resolve = resolver(seen.frame)

        def shape_at(path: tuple[str, ...]) -> tuple[int, ...] | None:
            return shape_of(resolve(path))

        def shaping(path: tuple[str, ...]) -> int:
            return self.born_shaping(resolve(path))

        for candidate in seen.info.elementwise.get(seen.line, ()):
            try:
                found = find_broadcast(candidate, shape_at, shaping)
            except Exception:
                found = None
            if found is not None:
                operands = (
                    self._operand(found.left, found.left_shape, resolve),
                    self._operand(found.right, found.right_shape, resolve),
                )
                return [_finding(seen.info.file, seen.line, found, operands)]
        return []

    def _operand(self, text: str, shape: tuple[int, ...], resolve: Resolve) -> Operand:
        """An operand written as ``text``: a name's value with its metadata and birth; an
        expression (``y * w``) with the dtype and device of the first tensor it names."""
        try:
            tree = ast.parse(text, mode="eval").body
        except SyntaxError:
            return Operand(name=text, shape=shape)
        paths = load_paths(tree)
        named = [resolve(path) for path in paths]
        tensors = [value for value in named if shape_of(value) not in (None, ())]
        if paths and ".".join(paths[0]) == text and named[0] is not None:
            return self.facts.operand(text, named[0], shape)
        if not tensors:
            return Operand(name=text, shape=shape)
        described = self.facts.operand(text, tensors[0], shape)
        return replace(described, file=None, line=None, passed_in=False, born_as=None)

    def _in_op(self, seen: OperatorRan) -> list[Finding]:
        site = seen.site
        if silences(site.shaping, reduced=site.reduced):
            return []  # shaped on purpose (None index, unsqueeze, view, ...)
        left_shape, right_shape = shape_of(seen.left), shape_of(seen.right)
        result_shape = shape_of(seen.result)
        if left_shape is None or right_shape is None or result_shape is None:
            return []
        if not accidental(left_shape, right_shape, result_shape, reduced=site.reduced):
            return []
        born = max(self.born_shaping(seen.left), self.born_shaping(seen.right))
        if silences(born, reduced=site.reduced):
            return []
        found = Broadcast(
            op=site.op,
            text=site.text,
            left=site.left,
            left_shape=left_shape,
            right=site.right,
            right_shape=right_shape,
            result=result_shape,
        )
        operands = (
            self.facts.operand(site.left, seen.left, left_shape),
            self.facts.operand(site.right, seen.right, right_shape),
        )
        return [_finding(seen.info.file, seen.line, found, operands)]

    def born_shaping(self, value: Any) -> int:
        """How the line where the value was born shaped it (``.unsqueeze(1)``: on purpose)."""
        if shape_of(value) in (None, ()):
            return NO_SHAPING
        origin = self.facts.origin_of(value)
        if origin is None:
            return NO_SHAPING
        # Shaping where the value was born (not in the expression) is a weaker sign: a loss
        # of it still fires (`y = t.view(-1, 1)` ... `((pred - y) ** 2).mean()`).
        text = self.facts.sources.get(origin.file).statement_text(origin.line)
        return min(line_shaping(text), KEEPDIM)


def _finding(file: str, line: int, found: Broadcast, operands: tuple[Operand, ...]) -> Finding:
    return Finding(
        kind="broadcast",
        severity="warning",
        file=file,
        line=line,
        expression=found.text,
        operands=operands,
        operator=found.op,
        result_shape=found.result,
    )


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
                    op=str(node[1]),
                    text=str(node[2]),
                    left=_label(node[3]),
                    left_shape=left,
                    right=_label(node[4]),
                    right_shape=right,
                    result=result,
                )
            )
        return result

    evaluate(candidate.expr)
    return found[0] if found else None
