"""JSON of a finding, in a trace file (``findings``) and on the child's channel: the data
(expression, operands, facts, the cause's chain), never a sentence (``present`` writes it)."""

from __future__ import annotations

from typing import Any

from shapelens.trace.model import (
    CauseStep,
    Facts,
    Finding,
    MemoryFacts,
    ModuleFacts,
    Operand,
    RelatedLocation,
)


def shape_of(value: Any) -> tuple[int, ...] | None:
    return None if value is None else tuple(int(d) for d in value)


def _operand_to_json(o: Operand) -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": o.name,
        "shape": None if o.shape is None else list(o.shape),
        "dtype": o.dtype,
        "device": o.device,
        "requires_grad": o.requires_grad,
        "line": o.line,
    }
    optional = {"file": o.file, "born_as": o.born_as, "rank": o.rank}
    out.update({k: v for k, v in optional.items() if v is not None})
    if o.passed_in:
        out["passed_in"] = True
    if o.odd:
        out["odd"] = True
    if o.module is not None:
        out["module"] = {
            "class": o.module.cls,
            "expects": dict(o.module.expects),
            "file": o.module.file,
            "line": o.module.line,
        }
    return out


def finding_to_json(f: Finding) -> dict[str, Any]:
    out: dict[str, Any] = {
        "kind": f.kind,
        "severity": f.severity,
        "file": f.file,
        "line": f.line,
        "expression": f.expression,
        "operands": [_operand_to_json(o) for o in f.operands],
    }
    facts = {
        "operator": f.operator,
        "result_shape": None if f.result_shape is None else list(f.result_shape),
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
    out.update({k: v for k, v in facts.items() if v is not None})
    if f.chain:
        out["chain"] = [_step_to_json(step) for step in f.chain]
    if f.related:
        out["related"] = [{"file": r.file, "line": r.line, "message": r.message} for r in f.related]
    if f.memory is not None:
        out["memory"] = {
            "device": f.memory.device,
            "live_bytes": f.memory.live_bytes,
            "budget_bytes": f.memory.budget_bytes,
            "breakdown": dict(f.memory.breakdown),
        }
    return out


def _memory_facts_of(data: Any) -> MemoryFacts | None:
    if data is None:
        return None
    return MemoryFacts(
        device=str(data["device"]),
        live_bytes=int(data["live_bytes"]),
        budget_bytes=int(data["budget_bytes"]),
        breakdown=tuple((str(k), int(v)) for k, v in dict(data["breakdown"]).items()),
    )


def _facts_to_json(facts: Facts) -> dict[str, Any]:
    out: dict[str, Any] = {
        "shape": None if facts.shape is None else list(facts.shape),
        "dtype": facts.dtype,
        "device": facts.device,
    }
    if facts.rank is not None:
        out["rank"] = facts.rank
    return out


def _step_to_json(step: CauseStep) -> dict[str, Any]:
    out: dict[str, Any] = {
        "file": step.file,
        "line": step.line,
        "expression": step.expression,
        "subject": step.subject,
    }
    if step.op is not None:
        out["op"] = step.op
    if step.before is not None:
        out["before"] = _facts_to_json(step.before)
    if step.after is not None:
        out["after"] = _facts_to_json(step.after)
    if step.ranks:
        out["ranks"] = [_facts_to_json(facts) for facts in step.ranks]
    return out


def _facts_from_json(facts: dict[str, Any]) -> Facts:
    rank = facts.get("rank")
    return Facts(
        shape=shape_of(facts.get("shape")),
        dtype=facts.get("dtype"),
        device=facts.get("device"),
        rank=None if rank is None else int(rank),
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
        line=None if o.get("line") is None else int(o["line"]),
        born_as=o.get("born_as"),
        passed_in=bool(o.get("passed_in", False)),
        odd=bool(o.get("odd", False)),
        rank=None if o.get("rank") is None else int(o["rank"]),
        module=None
        if module is None
        else ModuleFacts(
            cls=str(module["class"]),
            expects=tuple((str(k), int(v)) for k, v in dict(module.get("expects", {})).items()),
            file=module.get("file"),
            line=None if module.get("line") is None else int(module["line"]),
        ),
    )


def finding_from_json(f: dict[str, Any]) -> Finding:
    """A finding of a ``/2`` trace, of the child's channel, or (migrated) of a ``/1`` trace."""
    hit = f.get("hit")
    rank = f.get("rank")
    note = f.get("note", f.get("message"))  # /1 findings are sentences: kept as they were
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
        hit=None if hit is None else int(hit),
        error=f.get("error"),
        expected=f.get("expected"),
        rank=None if rank is None else int(rank),
        op=f.get("op"),
        advice=f.get("advice"),
        rewrite=f.get("rewrite"),
        chain=tuple(_step_from_json(step) for step in f.get("chain", ())),
        memory=_memory_facts_of(f.get("memory")),
        note=note,
        related=tuple(
            RelatedLocation(file=r["file"], line=int(r["line"]), message=r["message"])
            for r in f.get("related", ())
        ),
    )
