"""Findings in words: the one renderer of a :class:`Finding` for every surface (CLI listing,
diagnostics, hover, traceUpdated). Findings travel as data; nothing parses these texts."""

from __future__ import annotations

from shapelens.present.collectives import call_locations, hang_sentence, mismatch_sentence
from shapelens.present.memory import out_of_memory_sentence
from shapelens.present.shapes import metadata_text, shape_text
from shapelens.trace.model import (
    CauseStep,
    ExceptionInfo,
    Finding,
    Join,
    Operand,
    RelatedLocation,
)

MISMATCH_KINDS = ("device_mismatch", "dtype_mismatch")
SEVERITY_MARKS = {"error": "✖", "warning": "⚠", "info": "ℹ"}
_TITLES = {"nonfinite": "non-finite"}


def run_ending(status: str, exc: ExceptionInfo) -> tuple[str, str, str]:
    """(severity, kind, message) shown where the run ended: the program's uncaught exception,
    or where a shape-only run reached a value it could not know (not an error of the program)."""
    message = exc.message.strip()
    if status == "shape_only_stop":
        return "info", "shape_only_stop", f"shape-only run stopped here: {message}"
    return "error", "exception", f"{exc.type}: {message}" if message else exc.type


def finding_title(finding: Finding) -> str:
    """``broadcast``, ``device mismatch``, ``non-finite``: the kind as a reader says it."""
    return _TITLES.get(finding.kind, finding.kind.replace("_", " "))


def finding_message(finding: Finding) -> str:
    """The whole sentence: ``broadcast: `y` (4,) - `pred` (4, 1) → (4, 4); ...``."""
    if finding.note is not None:
        return finding.note
    if finding.kind == "rank_exception":
        verb = "died" if (finding.error or "").startswith("killed by") else "failed"
        return f"rank {finding.rank} {verb} here: {finding.error or 'an exception'}"
    rank = f"[rank {finding.rank}] " if finding.rank is not None else ""
    return f"{rank}{finding_title(finding)}: {_body(finding)}"


def finding_detail(finding: Finding) -> str:
    """The sentence without its leading kind (the listing and hover print the kind on its
    own): ``[rank 1] `y` (4,) - …`` of ``[rank 1] broadcast: `y` (4,) - …``."""
    rank = f"[rank {finding.rank}] " if finding.rank is not None else ""
    body = finding_message(finding).removeprefix(rank)
    return rank + body.removeprefix(finding_title(finding) + ": ")


def _body(finding: Finding) -> str:
    body = _sentence(finding)
    own_op = ("degenerate_op", "nonfinite", "collective_mismatch", "distributed_hang")
    # The hit it failed on, past the first: the last smaller batch of an epoch, not the first.
    late = finding.hit is not None and finding.hit > 1 and finding.kind != "nonfinite"
    on_hit = f" on hit {finding.hit}" if late else ""
    if finding.op is not None and finding.kind not in own_op:
        body = f"{finding.op} failed{on_hit}: {body}"
    elif on_hit:
        body = f"{body} (failed{on_hit})"
    return f"{body}; {finding.advice}" if finding.advice else body


def _sentence(finding: Finding) -> str:
    if finding.kind == "broadcast":
        return _broadcast(finding)
    if finding.kind == "nonfinite":
        return _nonfinite(finding)
    if finding.kind in MISMATCH_KINDS:
        return _mismatch(finding)
    if finding.kind == "rank_divergence":
        return _rank_divergence(finding)
    if finding.kind == "collective_mismatch":
        return mismatch_sentence(finding)
    if finding.kind == "distributed_hang":
        return hang_sentence(finding)
    if finding.kind == "library_warning":
        return _library_warning(finding)
    if finding.kind == "degenerate_op":
        return _degenerate(finding)
    if finding.kind == "out_of_memory" and finding.memory is not None:
        return out_of_memory_sentence(finding.memory)
    if finding.kind == "shape_comment":
        return _shape_comment(finding)
    return _generic(finding)


def mentions(finding: Finding, name: str) -> bool:
    """Whether the finding is about the variable ``name`` (hover shows it there)."""
    return any(o.name == name or o.born_as == name for o in finding.operands)


def related_locations(finding: Finding) -> list[RelatedLocation]:
    """Where the operands were born, each with what it was there."""
    if finding.related:
        return list(finding.related)
    noun = _noun(finding)
    found = call_locations(finding)
    for operand in finding.operands:
        file = operand.file or finding.file
        if operand.module is not None and operand.module.line is not None:
            found.append(
                RelatedLocation(
                    file=operand.module.file or finding.file,
                    line=operand.module.line,
                    message=f"`{operand.name}` declared here: {operand.module.cls}("
                    + ", ".join(f"{k}={v}" for k, v in operand.module.expects)
                    + ")",
                )
            )
            continue
        if operand.line is None or operand.module is not None:
            continue
        if (file, operand.line) == (finding.file, finding.line):
            continue  # born on the finding's own line: nothing to point at
        where = "passed in" if operand.passed_in else "created"
        alias = f" as `{operand.born_as}`" if operand.born_as not in (None, operand.name) else ""
        odd = f" (the odd {noun})" if operand.odd and noun else ""
        found.append(
            RelatedLocation(
                file=file,
                line=operand.line,
                message=f"`{operand.name}` {where} here{alias}: {_metadata(operand)}{odd}",
            )
        )
    return found + [
        RelatedLocation(file=step.file, line=step.line, message=step_text(step))
        for step in finding.chain
    ]


def step_text(step: CauseStep) -> str:
    """What a line of a cause chain did: ```flat`: Tensor.squeeze: (1, 4, 8, 8) → (4, 8, 8),
    dropped the size-1 dim 0``; ```loss` differs the same way: (8, 1) on rank 0, …``."""
    if step.note is not None:
        return f"{step.subject}: {step.note}"
    subject = f"`{step.subject}`"
    if step.ranks:
        values = ", ".join(
            f"{metadata_text(r.shape, r.dtype, r.device, python=True)} on rank {r.rank}"
            for r in step.ranks
        )
        return f"{subject} differs the same way: {values}"
    after, before = step.after, step.before
    if after is None:
        return subject
    made = metadata_text(after.shape, after.dtype, after.device, python=True)
    if step.op is None:
        return f"{subject}: {made}, from `{step.expression}`" if step.expression else subject
    if before is None:
        return f"{subject}: {step.op} made {made}"
    if before.shape != after.shape:
        change = f"{shape_text(before.shape, python=True)} → {shape_text(after.shape, python=True)}"
        return f"{subject}: {step.op}: {change}{_what_it_did(before.shape, after.shape, step.join)}"
    if before.dtype != after.dtype:
        return f"{subject}: {step.op}: {before.dtype} → {after.dtype}"
    return f"{subject}: {step.op}: {before.device} → {after.device}"


def _what_it_did(
    before: tuple[int, ...] | None, after: tuple[int, ...] | None, join: Join | None
) -> str:
    """A dropped size-1 dim (a batch of one squeezed away), a size halved from an odd one, a
    join along another dim than the one that would have fitted."""
    if join is not None:
        would_be = shape_text(join.would_be, python=True)
        return f", along dim {join.along}; along dim {join.meant} it would be {would_be}"
    if before is None or after is None:
        return ""
    if len(after) < len(before):
        ones = [i for i, d in enumerate(before) if d == 1]
        if ones and tuple(d for d in before if d != 1) == tuple(after):
            return f", dropped the size-1 dim {', '.join(str(i) for i in ones)}"
    if len(after) == len(before):
        for b, a in zip(before[2:], after[2:], strict=False):
            if b % 2 and a == b // 2:
                return f", halved the odd size {b} to {a} (rounded down: doubling gives {2 * a})"
    return ""


# -- one sentence per kind ---------------------------------------------------------------
def _metadata(operand: Operand) -> str:
    return metadata_text(operand.shape, operand.dtype, operand.device, python=True)


def _broadcast(finding: Finding) -> str:
    left, right = (*finding.operands, Operand(name="?"), Operand(name="?"))[:2]
    return (
        f"`{left.name}` {shape_text(left.shape, python=True)} {finding.operator or '?'} "
        f"`{right.name}` {shape_text(right.shape, python=True)} → "
        f"{shape_text(finding.result_shape, python=True)}; the result is larger than both "
        f"operands (in `{finding.expression}`)"
    )


def _nonfinite(finding: Finding) -> str:
    value = finding.operands[0] if finding.operands else Operand(name="?")
    hit = f" (hit {finding.hit} of this line)" if finding.hit is not None else ""
    described = metadata_text(value.shape, value.dtype, None, python=True)
    made = f", made by {finding.op}" if finding.op is not None else ""
    inputs = [f"`{o.name}`" for o in finding.operands[1:]]
    finite = f" of finite {', '.join(inputs)}" if finding.op is not None and inputs else ""
    state = finding.state or "NaN/Inf"
    return f"`{value.name}` {described} first holds {state} here{hit}{made}{finite}"


def _noun(finding: Finding) -> str:
    return {"device_mismatch": "device", "dtype_mismatch": "dtype"}.get(finding.kind, "")


def _mismatch(finding: Finding) -> str:
    noun = _noun(finding)
    odd = [o for o in finding.operands if o.odd]
    rest = [o for o in finding.operands if not o.odd]

    def describe(operand: Operand) -> str:
        if operand.module is not None and operand.shape is None:
            what = "parameters"
        else:
            what = shape_text(operand.shape or (), python=True)
        return f"`{operand.name}` {what} {operand.dtype} {operand.device}"

    value = (odd[0].device if noun == "device" else odd[0].dtype) if odd else "?"
    verb = "is on" if noun == "device" else "is"
    names = ", ".join(f"`{o.name}`" for o in rest)
    if noun == "dtype" and (not rest or any(o.dtype != finding.expected for o in rest)):
        # int64 indices for an Embedding, a bool mask: no other operand holds that dtype
        modules = [f"`{o.name}`" for o in rest if o.module is not None]
        tail = (
            f"{', '.join(modules)} expect{'' if len(modules) > 1 else 's'} {finding.expected}"
            if modules
            else f"{finding.expected} is expected"
        )
    else:
        tail = (
            names
            + (" are" if len(rest) > 1 else " is")
            + (" on " if noun == "device" else " ")
            + str(finding.expected)
        )
    return (
        ", ".join(describe(o) for o in odd)
        + f" {verb} {value}, but {tail} ({finding.error or 'this fails next'})"
    )


def _rank_divergence(finding: Finding) -> str:
    name = finding.operands[0].name if finding.operands else "?"
    per_rank = ", ".join(
        f"{metadata_text(o.shape, o.dtype, o.device)} on rank {o.rank}" for o in finding.operands
    )
    return f"`{name}` is {per_rank}"


def _module(operand: Operand) -> str:
    """``Linear(in_features=96)`` declared at line 12."""
    assert operand.module is not None
    expects = ", ".join(f"{k}={v}" for k, v in operand.module.expects)
    where = f" declared at line {operand.module.line}" if operand.module.line else ""
    return f"`{operand.name}` {operand.module.cls}({expects}){where}"


def _describe(operand: Operand) -> str:
    if operand.module is not None:
        return _module(operand)
    return f"`{operand.name}` {_metadata(operand)}"


def _library_warning(finding: Finding) -> str:
    operands = ", ".join(_describe(o) for o in finding.operands)
    return f"{finding.error}" + (f" ({operands})" if operands else "")


def _degenerate(finding: Finding) -> str:
    """``F.log_softmax of `logits` (32, 1) float32`` (the advice says why it is useless)."""
    operands = ", ".join(_describe(o) for o in finding.operands)
    return f"{finding.op or '?'} of {operands or finding.expression}"


def _shape_comment(finding: Finding) -> str:
    """```# (B, nh, T, hs)`` says (B, nh, T, hs); `v` was (2, 8, 4, 8)`` (the advice says
    which dim disagrees)."""
    subject = ", ".join(_describe(o) for o in finding.operands)
    return f"the comment says {finding.expected}, but {subject}"


def _generic(finding: Finding) -> str:
    """shape_mismatch and kinds without a sentence of their own: the error, then each
    operand (a module with what it expects)."""
    operands = ", ".join(_describe(o) for o in finding.operands)
    parts = [p for p in (finding.error, operands) if p]
    return "; ".join(parts) or (finding.expression or "")
