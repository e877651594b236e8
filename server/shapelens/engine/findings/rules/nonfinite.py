"""``nonfinite``: the first line where a tensor holds NaN or Inf, at bounded cost.

What is checked (documented in docs/findings.md): floating and complex tensors on the CPU
(GPU only when opted in: reading a result back synchronises the device) with at most
``nonfinite_max_elements`` elements, on each (line, variable)'s hits 1, 2, 4, 8, ...
(so a 10^6-iteration loop costs ~20 checks per variable), until the first one is found.
A check is one reduction (``sum``); only a non-finite sum is confirmed element-wise.
The engine scans values (:meth:`NonfiniteRule.scan`) and hands the rule those that hold
NaN or Inf (:class:`NonfiniteValue`); an Inf made on purpose (a mask) is no finding.
"""

from __future__ import annotations

import ast
import math
import re
import sys
from types import FrameType
from typing import Any

from shapelens.engine.findings.context import inputs_of
from shapelens.engine.findings.events import NonfiniteRead
from shapelens.engine.findings.rule import Rule
from shapelens.engine.recording import values
from shapelens.trace.finding import Finding, Operand


class NonfiniteRule(Rule[NonfiniteRead]):
    """``nonfinite``: a value holding NaN, or an Inf that is no mask, where it was read; the
    first such line only (then the rule is finished, and the engine stops scanning)."""

    kinds = ("nonfinite",)
    events = (NonfiniteRead,)
    setting = "nonfinite"

    def observe(self, seen: NonfiniteRead, /) -> list[Finding]:
        found = self._found(seen)
        self.finished = bool(found)
        return found

    def _found(self, seen: NonfiniteRead) -> list[Finding]:
        stats, frame, info = seen.stats, seen.frame, seen.info
        inputs = (
            inputs_of(frame, info, stats.line, seen.value)
            if frame is not None and info is not None
            else []
        )
        if seen.state == "Inf" and self._is_mask(seen, inputs):
            return []  # -inf on purpose (a causal mask): not a bug
        subject = Operand(
            name=stats.name,
            shape=None if stats.shape is None else tuple(int(d) for d in stats.shape),
            dtype=values.dtype_name(stats.dtype),
            device=values.device_name(stats.device),
            requires_grad=stats.requires_grad,
            line=stats.line,
        )
        text = self.facts.sources.get(stats.file).statement_text(stats.line)
        return [
            Finding(
                kind="nonfinite",
                severity="warning",
                file=stats.file,
                line=stats.line,
                expression=text or None,
                operands=(subject, *self.facts.operands(inputs)),  # the value, then its inputs
                state=seen.state,
                hit=stats.hits,
            )
        ]

    def _is_mask(self, seen: NonfiniteRead, inputs: list[tuple[str, Any]]) -> bool:
        """An Inf that is a mask: made by masked_fill/where/an inf literal, the log of a 0/1
        tensor, or carried over from an input that held it already."""
        stats, value, sources = seen.stats, seen.value, self.facts.sources
        text = sources.get(stats.file).statement_text(stats.line)
        if is_mask_text(text) or (takes_log(text) and holds_only_zero_or_inf(value)):
            return True
        if seen.frame is not None and seen.info is not None:
            statement = seen.info.source.statements.get(stats.line)
            if statement is not None and _names_an_infinity(statement, seen.frame):
                return True  # `torch.full((k,), NEG_INF)` with NEG_INF = float("-inf")
        origin = self.facts.origin_of(value)  # made by a helper: `mask = causal_mask(T)`
        if origin is not None and (origin.file, origin.line) != (stats.file, stats.line):
            born = sources.get(origin.file).statement_text(origin.line)
            if is_mask_text(born) or (takes_log(born) and holds_only_zero_or_inf(value)):
                return True
        for _, item in inputs:
            flags = self.facts.scan.flags(item, values.kind_of(item))
            if flags is not None and flags[1]:
                return True
        return False


def _names_an_infinity(statement: ast.AST, frame: FrameType) -> bool:
    """The statement names a Python float that is ±inf (a constant such as NEG_INF)."""
    scope, globals_ = frame.f_locals, frame.f_globals
    for node in ast.walk(statement):
        if isinstance(node, ast.Name):
            value = scope.get(node.id, globals_.get(node.id))
            if isinstance(value, float) and math.isinf(value):
                return True
    return False


# An Inf made on purpose: a causal or padding mask (docs/findings.md).
_MASK_TEXT = re.compile(
    r"masked_fill|\bwhere\(|float\(\s*['\"][+-]?inf|\b(math|torch|np|numpy)\.inf\b"
    r"|-\s*inf\b|finfo\([^)]*\)\.(min|max)|\bmask\b.*\blog\(|log\(.*\b(tril|triu|mask|eye)"
    r"|\w*_mask\s*\("  # a function that makes one: generate_square_subsequent_mask(T)
)
_LOG = re.compile(r"\blog\(|\.log\(\)")


def is_mask_text(text: str) -> bool:
    return bool(_MASK_TEXT.search(text))


def takes_log(text: str) -> bool:
    return bool(_LOG.search(text))


def holds_only_zero_or_inf(value: Any) -> bool:
    """``log`` of a 0/1 mask gives exactly 0 and -inf; a real underflow gives other values."""
    try:
        if values.kind_of(value) == values.TORCH:
            data = value.detach()
            return bool(((data == 0) | data.isinf()).all())
        numpy = sys.modules.get("numpy")
        if numpy is not None and isinstance(value, numpy.ndarray):
            return bool(((value == 0) | numpy.isinf(value)).all())
    except Exception:
        return False
    return False
