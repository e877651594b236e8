"""Where a tensor came from: the user line that made it, and the tensors it was made of.

The op watch sees every torch call a watched statement makes (its checked hits), with
operands and result. Each result is remembered here with its line, the op, its metadata and
the record of the data input it was made from (a weak reference to that input too, to find
where it was bound when no watched call made it), and where a watched call first changed it
in place (the tensor a backward needed as it was): metadata only, never the data, at most
:data:`CAPACITY` results by identity (the oldest forgotten first). When a call fails,
:meth:`Provenance.chain` follows the failing operand back through the lines that changed
what failed, earliest first: the ``.squeeze()`` that dropped the batch dim of a batch of
one, the stride-2 step at an odd size whose rounding the decoder's upsampling cannot undo.
Each step is data (the op, the value before and after); ``shapelens.present`` words it.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

from shapelens.engine.recording import values
from shapelens.trace.finding import CauseStep, Facts

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
        "changed",
        "depth",
        "expression",
        "file",
        "line",
        "meta",
        "op",
        "ref",
        "source",
        "source_meta",
        "source_ref",
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
        source_ref: weakref.ref[Any] | None,
    ) -> None:
        self.ref = ref
        self.file = file
        self.line = line
        self.expression = expression
        self.op = op
        self.meta = meta
        self.source = source
        self.source_meta = source_meta
        self.source_ref = source_ref
        """The data input itself, while it lives (where it was born, when no call made it)."""
        self.depth: int = 0 if source is None else source.depth + 1
        self.changed: InPlace | None = None
        """Where a watched call first changed it in place (``h += 0.1``)."""


Meta = tuple[tuple[int, ...] | None, str | None, str | None]
"""(shape, dtype, device)"""
InPlace = tuple[str, int, str | None, str]
"""(file, line, statement text, op): where a result was changed in place"""
Changed = Callable[["Meta | None", Meta], bool]
"""(the data input's metadata or None, the result's) → whether the step is in the chain"""
BornAt = Callable[[Any], "tuple[str, int, str | None] | None"]
"""A value → (file, line, statement text) where it was first bound, if known"""


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
        if any(result is tensor for tensor in inputs):  # in place: it keeps where it was made
            known = self.made(result)
            if known is not None and known.changed is None:
                known.changed = (file, line, expression, op)
            return
        try:
            ref = weakref.ref(result)
        except TypeError:
            return
        data = _data_input(inputs)
        source = self.made(data) if data is not None else None
        if source is not None and source.depth >= MAX_DEPTH:
            source = None  # a recurrence (h = f(h)): the chain's start is long gone anyway
        try:
            source_ref = None if data is None else weakref.ref(data)
        except TypeError:
            source_ref = None
        made = self._made
        made.pop(id(result), None)
        if len(made) >= self.capacity:
            del made[next(iter(made))]
        made[id(result)] = Made(
            ref=ref, file=file, line=line, expression=expression, op=op, meta=_meta(result),
            source=source, source_meta=None if data is None else _meta(data),
            source_ref=source_ref,
        )  # fmt: skip

    def made(self, value: Any) -> Made | None:
        """Where ``value`` (this very object) was made, if a watched call made it."""
        found = self._made.get(id(value))
        return found if found is not None and found.ref() is value else None

    def changed_in_place(self, shape: tuple[int, ...]) -> list[Made]:
        """The results of that shape that a watched call changed in place, oldest first."""
        return [m for m in self._made.values() if m.changed is not None and m.meta[0] == shape]

    def chain(
        self, value: Any, subject: str, changed: Changed, born_at: BornAt, *, of_shape: bool
    ) -> list[CauseStep]:
        """The lines that changed ``value`` the way ``changed`` tells (its shape, the failing
        dims of it, its dtype or device) on its way from where it was made, earliest first.
        Where the first value of the way was bound, when no watched call made it (a hit the
        op watch did not follow), is the first step. In a chain ``of_shape``, a start whose
        shape is not that of the value the first change was given (a dataset's tensor,
        indexed and stacked into the batch by a DataLoader on the way: the filter keeps the
        dims that failed, a batch's size can be what made them so) gives way to the step that
        made that value (the batch). A dtype or device is changed by the kept steps only."""
        records: list[Made] = []
        kept: list[Made] = []
        made = self.made(value)
        while made is not None and len(kept) < 4 * MAX_STEPS:
            records.append(made)
            if changed(made.source_meta, made.meta):  # asked latest first
                kept.append(made)
            made = made.source
        steps = [_step(r, subject) for r in kept]
        last = records[-1] if records else None
        root = last.source_ref() if last is not None and last.source_ref is not None else None
        ended = last is not None and last.source is None  # not cut short
        birth = born_at(root) if root is not None and ended else None
        if birth is not None:
            file, line, expression = birth
            steps.append(
                CauseStep(
                    file=file, line=line, expression=expression, subject=subject, op=None,
                    before=None, after=_facts(_meta(root)),
                )
            )  # fmt: skip
        changes = [r for r in kept if r.source_meta is not None]
        if of_shape and changes and steps and steps[-1].before is None:
            first = changes[-1]
            start = steps[-1].after
            made_it = first.source
            if made_it is not None and start is not None and start.shape != made_it.meta[0]:
                steps[-1] = _step(made_it, subject)
        if of_shape and len(steps) >= 2 and _stacked(steps[-1], steps[-2]):
            steps.pop()  # the batch starts where it was stacked, not at one sample's tensor
        steps.reverse()
        return steps[:MAX_STEPS]


def _stacked(made: CauseStep, then: CauseStep) -> bool:
    """Whether ``then`` put the tensor ``made`` made (a sample's, made from no tensor) into
    a batch in front of its dims: a DataLoader's collate stacking what a dataset made. The
    chain keeps that step only when a batch dim failed, which no sample had."""
    made_facts, given_facts, batch_facts = made.after, then.before, then.after
    if made.before is not None or made.op is None:
        return False
    if made_facts is None or given_facts is None or batch_facts is None:
        return False
    sample, given, batch = made_facts.shape, given_facts.shape, batch_facts.shape
    if sample is None or given is None or batch is None or sample != given:
        return False
    return len(batch) > len(given) and tuple(batch[len(batch) - len(given) :]) == tuple(given)


def _step(made: Made, subject: str) -> CauseStep:
    before = made.source_meta
    return CauseStep(
        file=made.file, line=made.line, expression=made.expression, subject=subject, op=made.op,
        before=None if before is None else _facts(before), after=_facts(made.meta),
    )  # fmt: skip


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
        shape = tuple(map(int, value.shape))
    except Exception:
        shape = None
    try:
        return shape, values.dtype_name(value.dtype), values.device_name(value.device)
    except Exception:
        return shape, None, None
