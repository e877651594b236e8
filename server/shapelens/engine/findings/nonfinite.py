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
import cmath
import math
import re
import sys
from types import FrameType
from typing import Any

from shapelens.engine import torch_compat, values
from shapelens.engine.code_info import CodeInfo
from shapelens.engine.findings.context import RunFacts, inputs_of
from shapelens.engine.findings.finding import Finding, Operand
from shapelens.engine.run_records import VarStats
from shapelens.settings.groups import FindingsConfig


class NonfiniteValue:
    """A value just read that holds NaN or Inf (``state``), with the record it was read
    into, and the frame whose statement stored it and that code's info (None: a returned
    value, or not the statement's first non-finite value: its inputs are not read again)."""

    __slots__ = ("frame", "info", "state", "stats", "value")

    def __init__(
        self,
        *,
        stats: VarStats,
        value: Any,
        state: str,
        frame: FrameType | None = None,
        info: CodeInfo | None = None,
    ) -> None:
        self.stats = stats
        self.value = value
        self.state = state
        self.frame = frame
        self.info = info


class NonfiniteRule:
    """``nonfinite``: a value holding NaN, or an Inf that is no mask, where it was read."""

    def __init__(self, facts: RunFacts, config: FindingsConfig) -> None:
        self.facts = facts
        self.max_elements = config.nonfinite_max_elements
        self.on_gpu = config.nonfinite_on_gpu

    def scan(self, value: Any, kind: int) -> str | None:
        """``"NaN"``, ``"Inf"`` or ``None`` (finite, or not checked under the bounds)."""
        return nonfinite_state(value, kind, self.max_elements, self.on_gpu)

    def observe(self, seen: NonfiniteValue, /) -> list[Finding]:
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

    def _is_mask(self, seen: NonfiniteValue, inputs: list[tuple[str, Any]]) -> bool:
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
            flags = nonfinite_flags(item, values.kind_of(item), self.max_elements, self.on_gpu)
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


def nonfinite_state(value: Any, kind: int, max_elements: int, on_gpu: bool) -> str | None:
    """``"NaN"``, ``"Inf"`` or ``None`` (finite, or not checked). Never raises."""
    flags = nonfinite_flags(value, kind, max_elements, on_gpu)
    if flags is None:
        return None
    has_nan, has_inf = flags
    return "NaN" if has_nan else "Inf" if has_inf else None


def nonfinite_flags(
    value: Any, kind: int, max_elements: int, on_gpu: bool
) -> tuple[bool, bool] | None:
    """``(has_nan, has_inf)``, or ``None`` when the bounded rules skip this value (too big, on
    a GPU without opt-in, sparse or nested). Integer and bool values are finite. Never raises."""
    try:
        if kind == values.TORCH:
            return _torch_flags(value, max_elements, on_gpu)
        if kind == values.ARRAY and type(value).__module__ == "numpy":
            return _numpy_flags(value, max_elements)
    except Exception:
        return None
    return None


def _torch_flags(tensor: Any, max_elements: int, on_gpu: bool) -> tuple[bool, bool] | None:
    dtype = tensor.dtype
    if not (dtype.is_floating_point or dtype.is_complex):
        return False, False
    if tensor.device.type != "cpu" and not on_gpu:
        return None
    if tensor.layout is not sys.modules["torch"].strided or tensor.is_nested:
        return None
    if tensor.numel() > max_elements:
        return None
    if tensor.numel() == 0:
        return False, False
    if _tracing(sys.modules["torch"]):
        return None
    detached = tensor.detach()
    if cmath.isfinite(detached.sum().item()):  # one reduction: finite means neither
        return False, False
    return bool(detached.isnan().any()), bool(detached.isinf().any())


def _tracing(torch: Any) -> bool:
    """torch.compile/export is tracing, or a dispatch mode (fake tensors, a user's mode) is
    active: our reduction would run on fake data or be recorded into their graph."""
    is_compiling = getattr(getattr(torch, "compiler", None), "is_compiling", None)
    if is_compiling is not None and is_compiling():
        return True
    return torch_compat.dispatch_mode_active(torch)


def _numpy_flags(array: Any, max_elements: int) -> tuple[bool, bool] | None:
    if array.dtype.kind not in "fc" or array.size == 0:
        return False, False
    if array.size > max_elements:
        return None
    numpy = sys.modules["numpy"]
    with numpy.errstate(all="ignore"):
        if cmath.isfinite(complex(array.sum())):
            return False, False
        return bool(numpy.isnan(array).any()), bool(numpy.isinf(array).any())


# An Inf made on purpose: a causal or padding mask (docs/findings.md).
_MASK_TEXT = re.compile(
    r"masked_fill|\bwhere\(|float\(\s*['\"][+-]?inf|\b(math|torch|np|numpy)\.inf\b"
    r"|-\s*inf\b|finfo\([^)]*\)\.(min|max)|\bmask\b.*\blog\(|log\(.*\b(tril|triu|mask|eye)"
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
