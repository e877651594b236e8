"""A finding, defined once, and its one codec.

The engine's rules build these records in the traced child; the channel and the trace file
carry them as the ``finding`` object of ``trace/schema.json`` (docs/trace-format.md); the
parent reads them back into the same records. Standard library only, and nothing of the
rest of the trace model: the child imports this module at start-up.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Literal

Severity = Literal["error", "warning", "info"]

FindingKind = str
"""One of :data:`KINDS`; docs/findings.md says when each is reported."""

KINDS = (
    "broadcast",
    "device_mismatch",
    "dtype_mismatch",
    "shape_mismatch",
    "op_error",
    "nonfinite",
    "library_warning",
    "degenerate_op",
    "out_of_memory",
    "shape_comment",
    "rank_divergence",
    "rank_exception",
    "collective_mismatch",
    "distributed_hang",
)
"""Every kind a finding may have (the schema's ``finding.kind`` lists the same)."""


@dataclass(frozen=True, kw_only=True)
class ModuleFacts:
    """An ``nn.Module`` operand: what it expects of its input and where it was declared."""

    cls: str
    """Class name (``Linear``)."""
    expects: tuple[tuple[str, int], ...] = ()
    """Its input expectation (``in_features``, ``in_channels``, ``num_embeddings``)."""
    file: str | None = None
    line: int | None = None
    """The line that declared it (``self.fc = nn.Linear(96, 10)``)."""


@dataclass(frozen=True, kw_only=True)
class Operand:
    """One value a finding is about, as it was when the finding was made."""

    name: str
    """The variable name, or the expression's text (``fc(x)``, ``y.squeeze(1)``)."""
    shape: tuple[int, ...] | None = None
    dtype: str | None = None
    device: str | None = None
    requires_grad: bool | None = None
    file: str | None = None
    line: int | None = None
    """Where the value was born: the first line that bound this very object."""
    born_as: str | None = None
    """The name it was born under, when it differs from ``name``."""
    passed_in: bool = False
    """It was first seen as a function argument (born in code we do not trace)."""
    odd: bool = False
    """The operand that disagrees with the others (mismatch findings)."""
    rank: int | None = None
    """The rank whose value this is (``rank_divergence``)."""
    module: ModuleFacts | None = None


@dataclass(frozen=True, kw_only=True)
class Facts:
    """A value's metadata at one step of a cause chain (``rank``: a distributed run's)."""

    shape: tuple[int, ...] | None
    dtype: str | None
    device: str | None
    rank: int | None = None


@dataclass(frozen=True, kw_only=True)
class Join:
    """A step that joined parts along dim ``along`` where, joined along ``meant``, they
    would have made ``would_be``: the size the failing call wanted (``torch.cat(outs,
    dim=0)`` of three (16, 32) where a ``Linear(96, …)`` takes (16, 96))."""

    along: int
    meant: int
    would_be: tuple[int, ...]


@dataclass(frozen=True, kw_only=True)
class CauseStep:
    """One user line in a finding's cause chain: ``op`` made ``subject``'s value ``after``
    out of one that was ``before`` (None: made from no tensor seen); no ``op``: the value
    the chain starts from was bound there. A distributed run's divergence lists instead the
    consequence's value on each rank (``ranks``)."""

    file: str
    line: int
    expression: str | None
    subject: str
    op: str | None = None
    before: Facts | None = None
    after: Facts | None = None
    ranks: tuple[Facts, ...] = ()
    note: str | None = None
    """A consequence on another rank (its dropped connection, torchrun's kill), in words."""
    join: Join | None = None
    """Where the step joined along another dim than the one that would have fitted."""


@dataclass(frozen=True, kw_only=True)
class StackFrame:
    """One frame of user code on a rank's stack (innermost first where a stack is listed)."""

    file: str
    line: int
    function: str


@dataclass(frozen=True, kw_only=True)
class RankCall:
    """Where one rank was in a collective finding: the collective it called (``op``, its
    ``seq``-th on ``group``, the tensors that must agree across ranks, metadata only), or,
    with no ``op``, the line it was running or ended at."""

    rank: int
    op: str | None
    file: str | None
    line: int | None
    seq: int | None = None
    group: str | None = None
    """``world``, ``ranks 0,2`` (a ``new_group``), ``0→1`` (a send/recv pair)."""
    tensors: tuple[Operand, ...] = ()
    state: str = "called"
    """``called`` (it returned), ``waiting`` (in it when the run was stopped), ``failed``
    (it raised), ``blocked`` (in torch code that waits on the other ranks: ``backward``,
    where DDP all-reduces gradients), ``running`` (in no collective), ``ended`` or
    ``died``."""
    note: str | None = None
    """How the rank ended, when that matters (``killed by SIGABRT``, ``exited 0``)."""
    stack: tuple[StackFrame, ...] = ()
    """Its stack through user code, innermost first (a hang's waiting rank)."""


@dataclass(frozen=True, kw_only=True)
class MemoryFacts:
    """out_of_memory: the device's live tensor bytes past its budget, by category."""

    device: str
    live_bytes: int
    budget_bytes: int
    breakdown: tuple[tuple[str, int], ...]


@dataclass(frozen=True, kw_only=True)
class RelatedLocation:
    """A location named by a finding of a ``shapelens.trace/1`` file (kept by the migration)."""

    file: str
    line: int
    message: str


@dataclass(frozen=True, kw_only=True)
class Finding:
    """A likely bug pointed at a line, as data; ``shapelens.present`` writes it in words."""

    kind: FindingKind
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
    """The hit of its line it was made on: nonfinite, the first that held it; an error's,
    the one that raised (a loop header's: its iteration, not counting the loop's exits)."""
    error: str | None = None
    """The error (or warning) torch raised, first line."""
    expected: str | None = None
    """mismatch: the device or dtype the other operands agree on."""
    rank: int | None = None
    """Distributed runs: the rank this finding comes from."""
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
    """shape_comment: the shape as it ran, written with the comment's own names
    (``(B, nh, T, T)``): what "Update shape comment" writes."""
    note: str | None = None
    """A finding read from a ``shapelens.trace/1`` file: its message, as written then."""
    related: tuple[RelatedLocation, ...] = ()
    """A finding read from a ``shapelens.trace/1`` file: its related locations."""
    calls: tuple[RankCall, ...] = ()
    """collective_mismatch, distributed_hang: each rank's collective (or where it was)."""


def with_hit(found: list[Finding], file: str, line: int, hit: int) -> list[Finding]:
    """``found``, those on ``file``:``line`` (that have none yet) with the ``hit`` of the
    line they were made on."""
    return [
        replace(f, hit=hit) if (f.file, f.line) == (file, line) and f.hit is None else f
        for f in found
    ]


# -- the codec: the channel's and the trace file's JSON ----------------------------------


def shape_of(value: Any) -> tuple[int, ...] | None:
    return None if value is None else tuple(int(d) for d in value)


def _shape_json(shape: tuple[int, ...] | None) -> list[int] | None:
    return None if shape is None else [int(d) for d in shape]


def _present(pairs: dict[str, Any]) -> dict[str, Any]:
    """The entries that are set: optional facts are left out of the JSON when absent."""
    return {key: value for key, value in pairs.items() if value is not None}


def _int_or_none(value: Any) -> int | None:
    return None if value is None else int(value)


def _module_to_json(module: ModuleFacts) -> dict[str, Any]:
    return {
        "class": module.cls,
        "expects": dict(module.expects),
        "file": module.file,
        "line": module.line,
    }


def _operand_to_json(o: Operand) -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": o.name,
        "shape": _shape_json(o.shape),
        "dtype": o.dtype,
        "device": o.device,
        "requires_grad": o.requires_grad,
        "line": o.line,
        **_present({"file": o.file, "born_as": o.born_as, "rank": o.rank}),
    }
    if o.passed_in:
        out["passed_in"] = True
    if o.odd:
        out["odd"] = True
    if o.module is not None:
        out["module"] = _module_to_json(o.module)
    return out


def _facts_to_json(facts: Facts) -> dict[str, Any]:
    out = {"shape": _shape_json(facts.shape), "dtype": facts.dtype, "device": facts.device}
    return {**out, **_present({"rank": facts.rank})}


def _step_to_json(step: CauseStep) -> dict[str, Any]:
    out: dict[str, Any] = {
        "file": step.file,
        "line": step.line,
        "expression": step.expression,
        "subject": step.subject,
        **_present({"op": step.op}),
    }
    if step.before is not None:
        out["before"] = _facts_to_json(step.before)
    if step.after is not None:
        out["after"] = _facts_to_json(step.after)
    if step.ranks:
        out["ranks"] = [_facts_to_json(facts) for facts in step.ranks]
    if step.note is not None:
        out["note"] = step.note
    if step.join is not None:
        join = step.join
        out["join"] = {"along": join.along, "meant": join.meant, "would_be": list(join.would_be)}
    return out


def _call_to_json(call: RankCall) -> dict[str, Any]:
    out: dict[str, Any] = {
        "rank": call.rank,
        "op": call.op,
        "file": call.file,
        "line": call.line,
        "state": call.state,
        **_present({"seq": call.seq, "group": call.group, "note": call.note}),
    }
    if call.tensors:
        out["tensors"] = [_operand_to_json(o) for o in call.tensors]
    if call.stack:
        out["stack"] = [
            {"file": f.file, "line": f.line, "function": f.function} for f in call.stack
        ]
    return out


_ALWAYS = ("kind", "severity", "file", "line", "expression")
"""A finding's keys that are always written, before its operands and facts."""


def finding_to_json(f: Finding) -> dict[str, Any]:
    """The finding as the channel and the trace file carry it."""
    out: dict[str, Any] = {key: getattr(f, key) for key in _ALWAYS}
    out["operands"] = [_operand_to_json(o) for o in f.operands]
    facts = {
        "operator": f.operator,
        "result_shape": _shape_json(f.result_shape),
        "state": f.state,
        "hit": f.hit,
        "error": f.error,
        "expected": f.expected,
        "rank": f.rank,
        "op": f.op,
        "advice": f.advice,
        "rewrite": f.rewrite,
        "note": f.note,
    }
    out.update(_present(facts))
    if f.chain:
        out["chain"] = [_step_to_json(step) for step in f.chain]
    if f.related:
        out["related"] = [{"file": r.file, "line": r.line, "message": r.message} for r in f.related]
    if f.calls:
        out["calls"] = [_call_to_json(call) for call in f.calls]
    if f.memory is not None:
        out["memory"] = {
            "device": f.memory.device,
            "live_bytes": f.memory.live_bytes,
            "budget_bytes": f.memory.budget_bytes,
            "breakdown": dict(f.memory.breakdown),
        }
    return out


def _facts_from_json(facts: dict[str, Any]) -> Facts:
    return Facts(
        shape=shape_of(facts.get("shape")),
        dtype=facts.get("dtype"),
        device=facts.get("device"),
        rank=_int_or_none(facts.get("rank")),
    )


def _step_from_json(step: dict[str, Any]) -> CauseStep:
    before, after = step.get("before"), step.get("after")
    return CauseStep(
        file=str(step["file"]),
        line=int(step["line"]),
        expression=step.get("expression"),
        subject=str(step["subject"]),
        op=step.get("op"),
        before=None if before is None else _facts_from_json(before),
        after=None if after is None else _facts_from_json(after),
        ranks=tuple(_facts_from_json(facts) for facts in step.get("ranks", ())),
        note=step.get("note"),
        join=_join_from_json(step.get("join")),
    )


def _join_from_json(join: dict[str, Any] | None) -> Join | None:
    if join is None:
        return None
    return Join(
        along=int(join["along"]),
        meant=int(join["meant"]),
        would_be=tuple(int(d) for d in join["would_be"]),
    )


def _call_from_json(call: dict[str, Any]) -> RankCall:
    return RankCall(
        rank=int(call["rank"]),
        op=call.get("op"),
        file=call.get("file"),
        line=_int_or_none(call.get("line")),
        seq=_int_or_none(call.get("seq")),
        group=call.get("group"),
        tensors=tuple(_operand_from_json(o) for o in call.get("tensors", ())),
        state=str(call.get("state", "called")),
        note=call.get("note"),
        stack=tuple(
            StackFrame(file=str(f["file"]), line=int(f["line"]), function=str(f["function"]))
            for f in call.get("stack", ())
        ),
    )


def _module_from_json(module: dict[str, Any]) -> ModuleFacts:
    expects = dict(module.get("expects", {}))
    return ModuleFacts(
        cls=str(module["class"]),
        expects=tuple((str(k), int(v)) for k, v in expects.items()),
        file=module.get("file"),
        line=_int_or_none(module.get("line")),
    )


def _operand_from_json(o: dict[str, Any]) -> Operand:
    module = o.get("module")
    return Operand(
        name=str(o["name"]),
        shape=shape_of(o.get("shape")),
        dtype=o.get("dtype"),
        device=o.get("device"),
        requires_grad=o.get("requires_grad"),
        file=o.get("file"),
        line=_int_or_none(o.get("line")),
        born_as=o.get("born_as"),
        passed_in=bool(o.get("passed_in", False)),
        odd=bool(o.get("odd", False)),
        rank=_int_or_none(o.get("rank")),
        module=None if module is None else _module_from_json(module),
    )


def _memory_from_json(data: Any) -> MemoryFacts | None:
    if data is None:
        return None
    return MemoryFacts(
        device=str(data["device"]),
        live_bytes=int(data["live_bytes"]),
        budget_bytes=int(data["budget_bytes"]),
        breakdown=tuple((str(k), int(v)) for k, v in dict(data["breakdown"]).items()),
    )


def finding_from_json(f: dict[str, Any]) -> Finding:
    """A finding of a ``/2`` trace, of the child's channel, or (migrated) of a ``/1`` trace."""
    return Finding(
        kind=str(f["kind"]),
        severity=f["severity"],
        file=str(f["file"]),
        line=int(f["line"]),
        expression=f.get("expression"),
        operands=tuple(_operand_from_json(o) for o in f.get("operands", ())),
        operator=f.get("operator"),
        result_shape=shape_of(f.get("result_shape")),
        state=f.get("state"),
        hit=_int_or_none(f.get("hit")),
        error=f.get("error"),
        expected=f.get("expected"),
        rank=_int_or_none(f.get("rank")),
        op=f.get("op"),
        advice=f.get("advice"),
        rewrite=f.get("rewrite"),
        chain=tuple(_step_from_json(step) for step in f.get("chain", ())),
        memory=_memory_from_json(f.get("memory")),
        note=f.get("note", f.get("message")),  # /1 findings are sentences: kept as they were
        related=tuple(
            RelatedLocation(file=r["file"], line=int(r["line"]), message=r["message"])
            for r in f.get("related", ())
        ),
        calls=tuple(_call_from_json(call) for call in f.get("calls", ())),
    )
