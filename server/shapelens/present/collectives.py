"""Collective findings in words: where each rank called (or waited, or was), and why the
ranks do not meet. ``present/findings.py`` calls these for ``collective_mismatch`` and
``distributed_hang``."""

from __future__ import annotations

import os

from shapelens.present.shapes import metadata_text
from shapelens.trace.model import Finding, RankCall, RelatedLocation

_SUFFIXES = {1: "st", 2: "nd", 3: "rd"}


def ordinal(n: int) -> str:
    """``1st``, ``2nd``, ``11th``, ``23rd``."""
    if 10 <= n % 100 <= 20:
        return f"{n}th"
    return f"{n}{_SUFFIXES.get(n % 10, 'th')}"


def where(call: RankCall) -> str:
    """``train.py:40`` (``?`` where unknown)."""
    if call.file is None or call.line is None:
        return "?"
    return f"{os.path.basename(call.file)}:{call.line}"


def tensors_text(call: RankCall) -> str:
    """```stats` (256,) float32 cpu``, each tensor that must agree."""
    return ", ".join(
        f"`{t.name}` {metadata_text(t.shape, t.dtype, t.device, python=True)}" for t in call.tensors
    )


def _called(call: RankCall, *, tensors: bool = True) -> str:
    passed = tensors_text(call) if tensors else ""
    return f"rank {call.rank} {passed + ' ' if passed else ''}at {where(call)}"


def mismatch_sentence(finding: Finding) -> str:
    calls = [c for c in finding.calls if c.op is not None]
    others = [c for c in finding.calls if c.op is None]
    op = f"`{finding.op}`" if finding.op else "a collective"
    what = finding.state
    if what in ("shape", "dtype"):
        noun = "shapes" if what == "shape" else "dtypes"
        return f"{op} called with different {noun}: " + ", ".join(_called(c) for c in calls)
    if what == "order":
        per_rank: dict[int, list[RankCall]] = {}
        for call in calls:
            per_rank.setdefault(call.rank, []).append(call)
        return "collectives called in a different order: " + "; ".join(
            f"rank {rank} calls "
            + " then ".join(_named_call(c) for c in sorted(mine, key=lambda c: c.seq or 0))
            for rank, mine in sorted(per_rank.items())
        )
    if what == "missing":
        present = ", ".join(_called(c) for c in calls)
        ranks = ", ".join(str(c.rank) for c in calls)
        ended = "; ".join(f"rank {c.rank} ended without it ({_how(c)})" for c in others)
        return f"{op} called on rank {ranks} only ({present}); {ended}"
    seq = calls[0].seq if calls else None
    nth = f" as their {ordinal(seq)} on {calls[0].group}" if seq and calls[0].group else ""
    return f"ranks call different collectives{nth}: " + ", ".join(
        f"rank {c.rank} {c.op} at {where(c)}" for c in calls
    )


def _named_call(call: RankCall) -> str:
    """``all_reduce(`count`) at train.py:40``."""
    names = ", ".join(f"`{t.name}`" for t in call.tensors[:3])
    return f"{call.op}({names}) at {where(call)}" if names else f"{call.op} at {where(call)}"


def hang_sentence(finding: Finding) -> str:
    positions = ", ".join(_position(c) for c in finding.calls)
    return f"the ranks wait and cannot meet: {positions}; {_why(finding.calls)}"


def _how(call: RankCall) -> str:
    """``ran to its end``, ``killed by SIGKILL at train.py:80``."""
    how = call.note or call.state
    return f"{how} at {where(call)}" if call.line is not None else how


def _position(call: RankCall) -> str:
    if call.state == "waiting":
        return f"rank {call.rank} in {call.op} at {where(call)}"
    if call.state == "running":
        return f"rank {call.rank} running {where(call)}"
    if call.state == "blocked":
        return f"rank {call.rank} in {call.note} at {where(call)}"
    return f"rank {call.rank} {_how(call)}"


def _why(calls: tuple[RankCall, ...]) -> str:
    """Why the ranks cannot meet, from where each was."""
    waiting = [c for c in calls if c.state == "waiting"]
    blocked = [c for c in calls if c.state == "blocked"]
    reasons = []
    for call in calls:
        if call.state == "running":
            reasons.append(f"rank {call.rank} is in no collective")
        elif call.state in ("ended", "died"):
            reasons.append(f"rank {call.rank} has ended ({call.note or call.state})")
    kinds = {(c.group, c.op) for c in waiting} | {(None, c.note) for c in blocked}
    if len(kinds) > 1:
        reasons.append("they wait in different collectives")
    elif len({c.seq for c in waiting}) > 1:
        reasons.append(
            ", ".join(f"rank {c.rank} waits in its {ordinal(c.seq or 0)} {c.op}" for c in waiting)
            + ": one rank made a call the other did not"
        )
    return "; ".join(reasons) or "every rank waits in the same collective"


def call_locations(finding: Finding) -> list[RelatedLocation]:
    """Each rank's call (or where it was), and the outer frames of a waiting rank."""
    found = []
    for call in finding.calls:
        if call.file is None or call.line is None:
            continue
        if call.state == "waiting" and finding.kind == "distributed_hang":
            message = f"rank {call.rank} waits in {call.op} here"
        elif call.state == "blocked":
            message = f"rank {call.rank} waits in {call.note} here"
        elif call.op is None:
            message = f"rank {call.rank} {call.note or call.state} here"
        else:
            passed = tensors_text(call)
            message = f"rank {call.rank} calls {call.op} here" + (
                f" with {passed}" if passed else ""
            )
        found.append(RelatedLocation(file=call.file, line=call.line, message=message))
        outer_frames = len(call.stack) if finding.kind == "distributed_hang" else 2
        for inner, outer in zip(call.stack, call.stack[1:outer_frames], strict=False):
            found.append(
                RelatedLocation(
                    file=outer.file,
                    line=outer.line,
                    message=f"rank {call.rank} calls `{inner.function}` here",
                )
            )
    return found
