"""Where a tensor came from: the user line that made it, and the tensors it was made of.

The op watch sees every torch call a watched statement makes (its checked hits: 1, 2, 4,
…), with operands and result. Each result is remembered here with its line, the op, and
weak references to its tensor inputs: metadata only, never the data, at most
:data:`CAPACITY` results (the oldest forgotten first), so memory stays bounded however long
the program runs. When a call fails, :meth:`Provenance.chain` follows the failing operand
back through the lines that changed its shape (or dtype, or device), earliest first: the
``.squeeze()`` that dropped the batch dim of a batch of one, the stride-2 step at an odd
size whose rounding the decoder's upsampling cannot undo.
"""

from __future__ import annotations

import weakref
from typing import Any

from shapelens.engine import values
from shapelens.engine.findings.finding import CauseStep, Facts

CAPACITY = 4096
"""Results remembered (each a few hundred bytes: shapes and weak references)."""
MAX_STEPS = 8
"""Steps of one chain (the earliest are kept: where the value went wrong)."""
MAX_DEPTH = 64
"""Records linked into one chain (each record links to the one of its data input)."""


class Made:
    """One result of a torch call on a user's line: its metadata, and what it was made of
    (``source``: the record of the data input it is a version of, None where it was made
    from no recorded tensor)."""

    __slots__ = (
        "depth",
        "expression",
        "file",
        "line",
        "meta",
        "op",
        "ref",
        "source",
        "source_meta",
    )

    def __init__(
        self,
        *,
        ref: weakref.ref[Any],
        file: str,
        line: int,
        expression: str | None,
        op: str,
        meta: Meta,
        source: Made | None,
        source_meta: Meta | None,
    ) -> None:
        self.ref = ref
        self.file = file
        self.line = line
        self.expression = expression
        self.op = op
        self.meta = meta
        self.source = source
        self.source_meta = source_meta
        self.depth: int = 0 if source is None else source.depth + 1


Meta = tuple[tuple[int, ...] | None, str | None, str | None]
"""(shape, dtype, device)"""
_FIELD = {"shape": 0, "dtype": 1, "device": 2}


class Provenance:
    """Results of watched torch calls, by identity, bounded."""

    def __init__(self, capacity: int = CAPACITY) -> None:
        self.capacity = capacity
        self._made: dict[int, Made] = {}

    def record(
        self,
        *,
        file: str,
        line: int,
        expression: str | None,
        op: str,
        inputs: list[Any],
        result: Any,
    ) -> None:
        """``result`` was made on ``file``:``line`` by ``op`` of ``inputs`` (tensors)."""
        if any(result is tensor for tensor in inputs):
            return  # in place: the tensor keeps where it came from
        try:
            ref = weakref.ref(result)
        except TypeError:
            return
        data = _data_input(inputs)
        source = self.made(data) if data is not None else None
        if source is not None and source.depth >= MAX_DEPTH:
            source = None  # a recurrence (h = f(h)): the chain's start is long gone anyway
        made = self._made
        made.pop(id(result), None)
        if len(made) >= self.capacity:
            del made[next(iter(made))]
        made[id(result)] = Made(
            ref=ref, file=file, line=line, expression=expression, op=op, meta=_meta(result),
            source=source, source_meta=None if data is None else _meta(data),
        )  # fmt: skip

    def made(self, value: Any) -> Made | None:
        """Where ``value`` (this very object) was made, if a watched call made it."""
        found = self._made.get(id(value))
        return found if found is not None and found.ref() is value else None

    def chain(self, value: Any, attribute: str, subject: str) -> list[CauseStep]:
        """The lines that changed ``value``'s ``attribute`` (``shape``, ``dtype``, ``device``)
        on its way from where it was made, earliest first; where it was first made by a
        watched call (no tensor input) is the first step."""
        field = _FIELD[attribute]
        steps: list[CauseStep] = []
        made = self.made(value)
        while made is not None and len(steps) < 4 * MAX_STEPS:
            before = made.source_meta
            if before is None or before[field] != made.meta[field]:
                steps.append(
                    CauseStep(
                        file=made.file, line=made.line, expression=made.expression,
                        subject=subject, op=made.op,
                        before=None if before is None else _facts(before),
                        after=_facts(made.meta),
                    )
                )  # fmt: skip
            made = made.source
        steps.reverse()
        return steps[:MAX_STEPS]


def _facts(meta: Meta) -> Facts:
    return Facts(shape=meta[0], dtype=meta[1], device=meta[2])


def _data_input(inputs: list[Any]) -> Any:
    """The input a result is a version of: the first tensor that is not a parameter (the
    data, not the weights)."""
    for tensor in inputs:
        if type(tensor).__name__ != "Parameter":
            return tensor
    return None


def _meta(value: Any) -> Meta:
    try:
        shape = tuple(int(d) for d in value.shape)
    except Exception:
        shape = None
    try:
        return shape, values.dtype_name(value.dtype), values.device_name(value.device)
    except Exception:
        return shape, None, None
