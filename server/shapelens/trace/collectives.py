"""Where the ranks of a distributed run stopped meeting: collectives that disagree, hangs,
and how each rank ended.

Each rank numbers its calls per group (``engine/distributed/collectives.py``); the n-th
call of a group must meet the n-th call of every other member. The first n at which they
do not is the finding:

- ``collective_mismatch``: the ranks' n-th calls differ in op, in the shapes or dtypes
  that must agree, or come in a different order (the n-th and n+1-th swapped), or some
  members ended without making it. Its chain runs from where the ranks' sizes began to
  differ (the divergences that differ the same way, the earliest bound first) to what the
  mismatch did to the other ranks (an abort, a dropped connection, torchrun's kill).
- ``distributed_hang``: the run was stopped (its time limit, ``--collective-timeout``, a
  cancel, Ctrl-C) while a rank waited in a collective: where each rank was, and why they
  cannot meet.

What the mismatch explains (the other ranks' failures) goes into its chain, never into
findings of its own.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from shapelens.trace.finding import CauseStep, Facts, Finding, RankCall
from shapelens.trace.messages import INTERNAL_GROUP
from shapelens.trace.model import Trace
from shapelens.trace.rank_endings import (
    STOPPED_BY_LAUNCHER,
    rank_end,
    short_error,
    where_it_ended,
)
from shapelens.trace.rank_facts import RankFacts

_INTERRUPTED = ("KeyboardInterrupt",)
"""A collective that raised these was waiting when the run was stopped (Ctrl-C)."""


@dataclass
class Verdict:
    """The findings about collectives, and what they explain."""

    findings: list[Finding] = field(default_factory=list)
    explained_ranks: set[int] = field(default_factory=set)
    """Ranks whose failure is a consequence told in a finding's chain."""
    explained_divergences: set[int] = field(default_factory=set)
    """Indexes of divergence findings folded into a chain."""


@dataclass(frozen=True)
class _Disagreement:
    group: str
    seq: int
    what: str
    """``op``, ``shape``, ``dtype``, ``order`` or ``missing``."""
    calls: tuple[RankCall, ...]


def check_collectives(
    traces: dict[int, Trace],
    facts: dict[int, RankFacts],
    divergences: list[Finding],
    *,
    stopped: bool,
) -> Verdict:
    """The collective findings of a merged run. ``stopped``: the launcher stopped the ranks
    (a time limit, a hang, a cancel, Ctrl-C), so those waiting were hung."""
    verdict = Verdict()
    if len(traces) < 2:
        return verdict
    waiting = {r: _waiting_call(f) for r, f in facts.items()}
    hung = stopped and any(call is not None for call in waiting.values())
    for disagreement in _disagreements(traces, facts):
        if hung and any(c.state == "waiting" for c in disagreement.calls):
            continue  # where the ranks wait: the hang finding tells it
        finding = _mismatch(disagreement, traces, facts, divergences, verdict)
        verdict.findings.extend(_at_each_line(finding))
    if hung:
        verdict.findings.extend(_hang(traces, facts, waiting))
    for rank in sorted(facts):
        if rank in verdict.explained_ranks or rank not in traces:
            continue
        death = _death(rank, traces, facts, verdict)
        if death is not None:
            verdict.findings.append(death)
    return verdict


def _death(
    rank: int, traces: dict[int, Trace], facts: dict[int, RankFacts], verdict: Verdict
) -> Finding | None:
    """A rank a signal killed (not torchrun's stop, not ours): a ``rank_exception`` at its
    last line, whose chain holds what its death did to the others (their dropped
    connections)."""
    signal = facts[rank].signal
    if signal is None or signal in STOPPED_BY_LAUNCHER:
        return None
    end = rank_end(rank, traces[rank], facts[rank])
    if end.file is None or end.line is None:
        return None
    verdict.explained_ranks.add(rank)
    everyone = _Disagreement(group="", seq=0, what="died", calls=())
    others = {r: t for r, t in traces.items() if r != rank}
    return Finding(
        kind="rank_exception",
        severity="error",
        file=end.file,
        line=end.line,
        error=end.how,
        rank=rank,
        chain=tuple(_consequences(everyone, others, facts, verdict)),
    )


def _waiting_call(facts: RankFacts) -> RankCall | None:
    """The collective the rank was in at its end: waiting, or raising after a Ctrl-C."""
    last = facts.calls[-1] if facts.calls else None
    if last is None:
        return None
    if last.state == "waiting":
        return last
    if last.state == "failed" and (last.note or "").startswith(_INTERRUPTED):
        return replace(last, state="waiting", note=None)
    return None


# -- disagreements ------------------------------------------------------------------------
def _members(group: str, ranks: Iterable[int]) -> list[int]:
    if group == "world":
        return sorted(ranks)
    if group.startswith("ranks "):
        return [int(r) for r in group.removeprefix("ranks ").split(",")]
    if "→" in group and not group.startswith("any"):
        source, _, target = group.partition("→")
        return [int(source), int(target)]
    return []


def _disagreements(traces: dict[int, Trace], facts: dict[int, RankFacts]) -> list[_Disagreement]:
    """The first disagreement of each group."""
    groups = sorted(
        {
            c.group
            for f in facts.values()
            for c in f.calls
            if c.group is not None and not c.group.endswith(INTERNAL_GROUP)
        }
    )
    found = []
    for group in groups:
        members = _members(group, traces)
        if len(members) < 2 or any(m not in facts for m in members):
            continue
        by_rank = {
            m: {c.seq: c for c in facts[m].calls if c.group == group and c.seq is not None}
            for m in members
        }
        disagreement = _first_disagreement(group, by_rank, traces, facts)
        if disagreement is not None:
            found.append(disagreement)
    return found


def _first_disagreement(
    group: str,
    by_rank: dict[int, dict[int, RankCall]],
    traces: dict[int, Trace],
    facts: dict[int, RankFacts],
) -> _Disagreement | None:
    kept_from = max((min(calls) for calls in by_rank.values() if calls), default=1)
    seqs = sorted({seq for calls in by_rank.values() for seq in calls if seq >= kept_from})
    point_to_point = "→" in group
    for seq in seqs:
        present = {r: calls[seq] for r, calls in by_rank.items() if seq in calls}
        missing = [r for r in by_rank if r not in present]
        if missing:
            if any(_ended_on_its_own(traces[r], facts[r]) for r in missing):
                return _Disagreement(group, seq, "missing", tuple(present.values()))
            return None  # a rank that died or raised elsewhere: its own finding says so
        calls = [present[r] for r in sorted(present)]
        ops = {c.op for c in calls}
        if not point_to_point and len(ops) > 1:
            return _Disagreement(group, seq, _op_or_order(seq, by_rank), tuple(calls))
        metadata = {tuple((t.shape, t.dtype) for t in c.tensors) for c in calls}
        if len(metadata) > 1:
            shapes = {tuple(t.shape for t in c.tensors) for c in calls}
            what = "shape" if len(shapes) > 1 else "dtype"
            if _swapped(seq, by_rank):
                what = "order"
            return _Disagreement(group, seq, what, tuple(calls))
        if _swapped(seq, by_rank):
            return _Disagreement(group, seq, "order", tuple(calls))
    return None


def _ended_on_its_own(trace: Trace, facts: RankFacts) -> bool:
    return trace.status in ("ok", "exit") and facts.signal is None


def _op_or_order(seq: int, by_rank: dict[int, dict[int, RankCall]]) -> str:
    return "order" if _swapped(seq, by_rank) else "op"


def _swapped(seq: int, by_rank: dict[int, dict[int, RankCall]]) -> bool:
    """Whether some rank makes, at ``seq`` and ``seq + 1``, the calls another makes at
    ``seq + 1`` and ``seq`` (same lines, other order)."""
    for identity in (_site, _subject):
        pairs = set()
        for calls in by_rank.values():
            first, second = calls.get(seq), calls.get(seq + 1)
            if first is None or second is None:
                return False
            pairs.add((identity(first), identity(second)))
        if len(pairs) > 1 and any((b, a) in pairs for a, b in pairs if a != b and a and b):
            return True
    return False


def _site(call: RankCall) -> tuple[object, ...]:
    return (call.op, call.file, call.line)


def _subject(call: RankCall) -> tuple[object, ...]:
    """The call by what it was given (``all_reduce`` of ``count``), wherever it was made;
    empty when it was given no tensor."""
    names = tuple(t.name for t in call.tensors)
    return (call.op, *names) if names else ()


# -- mismatch -----------------------------------------------------------------------------
def _mismatch(
    disagreement: _Disagreement,
    traces: dict[int, Trace],
    facts: dict[int, RankFacts],
    divergences: list[Finding],
    verdict: Verdict,
) -> Finding:
    calls = list(disagreement.calls)
    if disagreement.what == "order":
        calls += [
            c
            for r in sorted({c.rank for c in calls})
            for c in facts[r].calls
            if c.group == disagreement.group and c.seq == disagreement.seq + 1
        ]
    present = {c.rank for c in calls}
    for rank in sorted(r for r in _members(disagreement.group, traces) if r not in present):
        calls.append(where_it_ended(rank, traces[rank], facts[rank], state="ended"))
    calls.sort(key=lambda c: (c.rank, c.seq or 0))
    lead = calls[0]
    chain = _origin(disagreement, divergences, traces, facts, verdict)
    chain += _consequences(disagreement, traces, facts, verdict)
    return Finding(
        kind="collective_mismatch",
        severity="error",
        file=lead.file or "",
        line=lead.line or 0,
        op=lead.op,
        state=disagreement.what,
        calls=tuple(calls),
        chain=tuple(chain),
    )


def _origin(
    disagreement: _Disagreement,
    divergences: list[Finding],
    traces: dict[int, Trace],
    facts: dict[int, RankFacts],
    verdict: Verdict,
) -> list[CauseStep]:
    """The divergences whose sizes differ between the same ranks, the same way, as the
    collective's tensors do: the earliest bound first (where the sizes began to differ)."""
    pattern = _size_pattern({c.rank: _numel(c.tensors) for c in disagreement.calls})
    if pattern is None:
        return []
    matching = []
    for index, divergence in enumerate(divergences):
        sizes = {o.rank: _numel_of(o.shape) for o in divergence.operands}
        if _size_pattern(sizes) == pattern:
            matching.append(index)
    lowest = min(c.rank for c in disagreement.calls)
    order = facts[lowest].first_bound if lowest in facts else {}

    def bound(index: int) -> tuple[bool, int, str, int]:
        """A value that always had its size on each rank (an uneven split) made the
        difference; one whose size changed (a forward's input) took it on later."""
        d = divergences[index]
        changed = any(
            _size_changed(traces.get(o.rank), d, o.name) for o in d.operands if o.rank is not None
        )
        return (changed, order.get((d.file, d.line), len(order)), d.file, d.line)

    steps = []
    for index in sorted(matching, key=bound):
        verdict.explained_divergences.add(index)
        steps.append(divergence_step(divergences[index]))
    return steps


def divergence_step(divergence: Finding) -> CauseStep:
    """A ``rank_divergence`` as a step of another finding's chain: its line, its variable,
    and the variable's value on each rank."""
    return CauseStep(
        file=divergence.file,
        line=divergence.line,
        expression=None,
        subject=divergence.operands[0].name,
        ranks=tuple(
            Facts(shape=o.shape, dtype=o.dtype, device=o.device, rank=o.rank)
            for o in divergence.operands
        ),
    )


def _size_changed(trace: Trace | None, divergence: Finding, name: str) -> bool:
    """Whether ``name`` on the divergence's line took several shapes on that rank."""
    if trace is None:
        return False
    for line in trace.lines:
        if (line.file, line.line) == (divergence.file, divergence.line):
            return any(v.name == name and len(v.shapes) > 1 for v in line.vars)
    return False


def _numel(tensors: Iterable[object]) -> int | None:
    total = 0
    for tensor in tensors:
        size = _numel_of(getattr(tensor, "shape", None))
        if size is None:
            return None
        total += size
    return total


def _numel_of(shape: tuple[int, ...] | None) -> int | None:
    if shape is None:
        return None
    size = 1
    for dim in shape:
        size *= dim
    return size


def _size_pattern(sizes: dict[int | None, int | None]) -> tuple[frozenset[int], ...] | None:
    """The ranks grouped by size, smallest first: ({1}, {0, 2}) for 250, 256, 256; None
    when the sizes agree or are unknown."""
    known = {r: s for r, s in sizes.items() if r is not None and s is not None}
    if len(set(known.values())) < 2 or len(known) != len(sizes):
        return None
    by_size: dict[int, set[int]] = {}
    for rank, size in known.items():
        by_size.setdefault(size, set()).add(rank)
    return tuple(frozenset(by_size[size]) for size in sorted(by_size))


def _consequences(
    disagreement: _Disagreement,
    traces: dict[int, Trace],
    facts: dict[int, RankFacts],
    verdict: Verdict,
) -> list[CauseStep]:
    """What the mismatch did to each rank that did not end on its own: it aborted in the
    call, raised in it (or a later one), or torchrun stopped it."""
    steps = []
    for rank in sorted(traces):
        trace, rank_facts = traces[rank], facts.get(rank, RankFacts())
        if _ended_on_its_own(trace, rank_facts) and trace.status == "ok":
            continue
        after = [
            c
            for c in rank_facts.calls
            if (c.group == disagreement.group or not disagreement.group)
            and c.seq is not None
            and c.seq >= disagreement.seq
            and c.state in ("waiting", "failed")
        ]
        signal = rank_facts.signal
        if after:
            call = after[0]
            end = call
            if call.note is not None:
                note = f"{call.op} raised {short_error(call.note)}"
            elif signal in STOPPED_BY_LAUNCHER:
                note = f"stopped by torchrun ({signal}) in {call.op}, when another rank failed"
            elif signal is not None:
                note = f"killed by {signal} in {call.op}"
            else:
                note = f"ended in {call.op}"
        elif trace.exception is not None and rank_facts.inside is not None:
            # raised where it waited on the others without a call of its own (DDP's
            # gradient all-reduce in backward)
            exc = trace.exception
            note = f"{short_error(f'{exc.type}: {exc.message}')} in {rank_facts.inside}"
            end = where_it_ended(rank, trace, rank_facts, state="ended")
        elif signal in STOPPED_BY_LAUNCHER:
            note = f"stopped by torchrun ({signal}) when another rank failed"
            end = where_it_ended(rank, trace, rank_facts, state="died")
        else:
            continue
        if end.file is None or end.line is None:
            continue
        verdict.explained_ranks.add(rank)
        steps.append(
            CauseStep(
                file=end.file, line=end.line, expression=None, subject=f"rank {rank}", note=note
            )
        )
    return steps


def _at_each_line(finding: Finding) -> list[Finding]:
    """The finding at each distinct line of its calls (and of the ranks blocked in torch):
    every rank's line shows it."""
    lines = list(
        dict.fromkeys(
            (c.file, c.line)
            for c in finding.calls
            if (c.op or c.state == "blocked") and c.file is not None and c.line is not None
        )
    )
    if not lines:
        return [finding]
    return [replace(finding, file=file, line=line) for file, line in lines]


# -- hangs --------------------------------------------------------------------------------
def _hang(
    traces: dict[int, Trace], facts: dict[int, RankFacts], waiting: dict[int, RankCall | None]
) -> list[Finding]:
    calls = []
    for rank in sorted(traces):
        call = waiting.get(rank)
        if call is not None:
            calls.append(call)
        else:
            calls.append(where_it_ended(rank, traces[rank], facts.get(rank, RankFacts())))
    lead = next(c for c in calls if c.state == "waiting")
    finding = Finding(
        kind="distributed_hang",
        severity="error",
        file=lead.file or "",
        line=lead.line or 0,
        op=lead.op,
        calls=tuple(calls),
    )
    return _at_each_line(finding)
