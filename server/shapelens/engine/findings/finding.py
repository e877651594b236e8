"""A finding as the engine makes it, and its one serialisation: the trace format's finding.

Every rule builds a :class:`Finding`; :meth:`Finding.to_message` writes what the channel
carries, which is the ``finding`` object of ``trace/schema.json`` as the trace file holds it
(docs/trace-format.md). The parent's trace model reads it back; the child never imports
that model (its start-up time), hence these small classes of its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

Severity = Literal["error", "warning", "info"]


@dataclass(frozen=True, kw_only=True)
class ModuleFacts:
    """An ``nn.Module`` operand: what it expects of its input, and where it was declared."""

    cls: str
    expects: tuple[tuple[str, int], ...] = ()
    file: str | None = None
    line: int | None = None


@dataclass(frozen=True, kw_only=True)
class Operand:
    """One value a finding is about, as it was when the finding was made."""

    name: str
    shape: tuple[int, ...] | None = None
    dtype: str | None = None
    device: str | None = None
    requires_grad: bool | None = None
    file: str | None = None
    line: int | None = None
    """Where the value was born (the first line that bound this very object)."""
    born_as: str | None = None
    passed_in: bool = False
    odd: bool = False
    """The operand that disagrees with the others (mismatch findings)."""
    module: ModuleFacts | None = None

    def to_message(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name,
            "shape": None if self.shape is None else [int(d) for d in self.shape],
            "dtype": self.dtype,
            "device": self.device,
            "requires_grad": self.requires_grad,
            "line": self.line,
        }
        if self.file is not None:
            out["file"] = self.file
        if self.born_as is not None:
            out["born_as"] = self.born_as
        if self.passed_in:
            out["passed_in"] = True
        if self.odd:
            out["odd"] = True
        module = self.module
        if module is not None:
            out["module"] = {
                "class": module.cls,
                "expects": dict(module.expects),
                "file": module.file,
                "line": module.line,
            }
        return out


@dataclass(frozen=True, kw_only=True)
class Facts:
    """A value's metadata at one step of a cause chain."""

    shape: tuple[int, ...] | None
    dtype: str | None
    device: str | None

    def to_message(self) -> dict[str, Any]:
        shape = None if self.shape is None else [int(d) for d in self.shape]
        return {"shape": shape, "dtype": self.dtype, "device": self.device}


@dataclass(frozen=True, kw_only=True)
class MemoryFacts:
    """out_of_memory: the device's live tensor bytes past its budget, by category."""

    device: str
    live_bytes: int
    budget_bytes: int
    breakdown: tuple[tuple[str, int], ...]

    def to_message(self) -> dict[str, Any]:
        return {
            "device": self.device,
            "live_bytes": self.live_bytes,
            "budget_bytes": self.budget_bytes,
            "breakdown": dict(self.breakdown),
        }


@dataclass(frozen=True, kw_only=True)
class CauseStep:
    """One user line in a finding's cause chain: ``op`` made ``subject``'s value ``after``
    out of one that was ``before`` (None: made from no tensor we saw); no ``op``: the value
    the way started from was bound there."""

    file: str
    line: int
    expression: str | None
    subject: str
    op: str | None
    before: Facts | None
    after: Facts

    def to_message(self) -> dict[str, Any]:
        return {
            "file": self.file,
            "line": self.line,
            "expression": self.expression,
            "subject": self.subject,
            **({"op": self.op} if self.op is not None else {}),
            **({"before": self.before.to_message()} if self.before is not None else {}),
            "after": self.after.to_message(),
        }


@dataclass(frozen=True, kw_only=True)
class Finding:
    """A likely bug pointed at a line (docs/findings.md lists the kinds)."""

    kind: str
    severity: Severity
    file: str
    line: int
    expression: str | None = None
    """The source text the finding is about (``(y - pred) ** 2``)."""
    operands: tuple[Operand, ...] = ()
    operator: str | None = None
    """broadcast: the elementwise operator (``-``)."""
    result_shape: tuple[int, ...] | None = None
    """broadcast: the shape the operands broadcast to."""
    state: str | None = None
    """nonfinite: ``NaN`` or ``Inf``."""
    hit: int | None = None
    """nonfinite: the hit of the line on which it was first seen."""
    error: str | None = None
    """The error (or warning) torch raised, first line."""
    expected: str | None = None
    """mismatch: the device or dtype the other operands agree on."""
    op: str | None = None
    """The torch call that raised (``torch.dot``, ```self.fc` (Linear)``); degenerate_op:
    the call that did nothing useful (``F.log_softmax``)."""
    advice: str | None = None
    """What would make the failed call run (found by calling it again on meta tensors);
    degenerate_op: why the call does nothing useful, and what to write instead."""
    chain: tuple[CauseStep, ...] = ()
    """The user lines that made the failing value what it was, earliest first."""
    memory: MemoryFacts | None = None
    """out_of_memory: what was live where the budget ran out."""
    rewrite: str | None = None
    """shape_comment: the shape as it ran, written with the comment's own names."""

    def to_message(self) -> dict[str, Any]:
        """The finding as the channel and the trace file carry it."""
        out: dict[str, Any] = {
            "kind": self.kind,
            "severity": self.severity,
            "file": self.file,
            "line": self.line,
            "expression": self.expression,
            "operands": [operand.to_message() for operand in self.operands],
        }
        facts = {
            "operator": self.operator,
            "result_shape": None if self.result_shape is None else list(self.result_shape),
            "state": self.state,
            "hit": self.hit,
            "error": self.error,
            "expected": self.expected,
            "op": self.op,
            "advice": self.advice,
            "rewrite": self.rewrite,
        }
        out.update({key: value for key, value in facts.items() if value is not None})
        if self.chain:
            out["chain"] = [step.to_message() for step in self.chain]
        if self.memory is not None:
            out["memory"] = self.memory.to_message()
        return out
