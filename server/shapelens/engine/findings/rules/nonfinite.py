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
from collections.abc import Iterator
from dataclasses import replace
from types import FrameType
from typing import Any

from shapelens.engine.findings.context import inputs_of, shape_of
from shapelens.engine.findings.events import NonfiniteRead
from shapelens.engine.findings.nonfinite_scan import (
    holds_only_zero_or_inf,
    is_mask_text,
    takes_log,
)
from shapelens.engine.findings.op_names import name_of, op_label
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
        if seen.state == "Inf" and self._made_as_mask(seen):
            return []  # -inf on purpose (a causal mask): not a bug
        at_origin = self._origin(seen)
        if at_origin is not None:
            return at_origin
        if seen.state == "Inf" and self._carried(inputs):
            return []  # an input held it already (a mask, most often): not made here
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
                hit=self._hit(stats.file, stats.line, stats.hits),
            )
        ]

    def _origin(self, seen: NonfiniteRead) -> list[Finding] | None:
        """Where the value first turned non-finite: in the statement's calls (a helper's
        ``log``, a forward's ``exp``), or, where its inputs held it already, where they were
        made; on that call's own line and hit. None: not found (the line read is the
        finding's); empty: it was a mask."""
        search = self.facts.origins
        if search is None or seen.frame is None or seen.info is None:
            return None
        found = search.find(seen.frame, seen.info, seen.stats.line)
        if found is None:
            return None
        info, line = found.info, found.line
        source = info.source
        if found.state == "Inf" and is_mask_text(source.statement_text(line)):
            return []
        statement = source.statements.get(line)
        call = _call_node(statement, found.op, found.nth)
        stored = info.stores.get(line, ())
        if len(stored) == 1 and (call is None or getattr(statement, "value", None) is call):
            name = stored[0]  # `log_not_p = torch.log(1 - p)`: the result is what it stored
        else:
            name = ast.unparse(call) if call is not None else op_label(found.op)
        result = self.facts.operand(name, found.result, shape_of(found.result))
        inputs = [(_argument_text(call, i), x) for i, x in enumerate(found.inputs)]
        finding = Finding(
            kind="nonfinite",
            severity="warning",
            file=info.file,
            line=line,
            expression=source.statement_text(line) or None,
            operands=(replace(result, line=line), *self.facts.operands(inputs)),
            state=found.state,
            hit=self._hit(info.file, line, info.hits.get(line, 0)),
            op=op_label(found.op),
        )
        return [finding]

    def _hit(self, file: str, line: int, counted: int) -> int:
        """The line's hit now: counted, or estimated where its events are switched off."""
        return max(counted, self.facts.hits_of(file, line)) if self.facts.hits_of else counted

    def _made_as_mask(self, seen: NonfiniteRead) -> bool:
        """An Inf that is a mask: made by masked_fill/where/an inf literal, the log of a 0/1
        tensor, or by a helper whose line makes one (``mask = causal_mask(T)``)."""
        stats, value, sources = seen.stats, seen.value, self.facts.sources
        text = sources.get(stats.file).statement_text(stats.line)
        if is_mask_text(text) or (takes_log(text) and holds_only_zero_or_inf(value)):
            return True
        if seen.frame is not None and seen.info is not None:
            statement = seen.info.source.statements.get(stats.line)
            if statement is not None and _names_an_infinity(statement, seen.frame):
                return True  # `torch.full((k,), NEG_INF)` with NEG_INF = float("-inf")
        origin = self.facts.origin_of(value)
        if origin is not None and (origin.file, origin.line) != (stats.file, stats.line):
            born = sources.get(origin.file).statement_text(origin.line)
            if is_mask_text(born) or (takes_log(born) and holds_only_zero_or_inf(value)):
                return True
        return False

    def _carried(self, inputs: list[tuple[str, Any]]) -> bool:
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


def _call_node(statement: ast.AST | None, op: Any, nth: int) -> ast.Call | None:
    """The ``nth`` call of ``op`` in the statement, in the order Python makes them (the
    second ``torch.log`` of ``log(p) + log(1 - p)``)."""
    name = name_of(op)
    calls = [
        node
        for node in _in_evaluation_order(statement)
        if isinstance(node, ast.Call) and _called(node) == name  # (narrows the type)
    ]
    return calls[nth] if nth < len(calls) else (calls[0] if calls else None)


def _in_evaluation_order(node: ast.AST | None) -> Iterator[ast.AST]:
    """Each node after its children: a call after its function and its arguments."""
    if node is None:
        return
    for child in ast.iter_child_nodes(node):
        yield from _in_evaluation_order(child)
    yield node


def _called(node: ast.AST) -> str | None:
    """The name a call calls (``log`` of ``torch.log(x)`` and of ``x.log()``), else None."""
    if not isinstance(node, ast.Call):
        return None
    func = node.func
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")


def _argument_text(call: ast.Call | None, index: int) -> str:
    """The text of the ``index``-th tensor argument of ``call`` (``1 - p`` of
    ``torch.log(1 - p)``; ``x`` of ``x.log()``), else ``input``."""
    if call is None:
        return "input"
    func = call.func
    arguments = ([func.value] if isinstance(func, ast.Attribute) else []) + list(call.args)
    if isinstance(func, ast.Attribute) and _is_namespace_name(func.value):
        arguments = arguments[1:]
    return ast.unparse(arguments[index]) if index < len(arguments) else "input"


def _is_namespace_name(node: ast.expr) -> bool:
    return isinstance(node, ast.Name) and node.id in ("torch", "F", "np", "math")
