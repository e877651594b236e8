"""Merging per-rank traces into one: values per rank, and where ranks stop agreeing."""

from __future__ import annotations

import os
from dataclasses import replace

from shapelens.trace.collectives import Verdict, check_collectives, divergence_step
from shapelens.trace.model import (
    ExceptionInfo,
    Finding,
    LineCost,
    MemoryReport,
    Operand,
    RankValue,
    RunStatus,
    ShapeOnlyRun,
    SimulatedLine,
    Trace,
    TracedLine,
    TracedVar,
)
from shapelens.trace.rank_endings import rank_end, short_error
from shapelens.trace.rank_facts import RankFacts

KINDS = ("rank_divergence", "rank_exception", "collective_mismatch", "distributed_hang")
"""The finding kinds a merge makes (the engine's rules make the others)."""

_SEVERITY: dict[RunStatus, int] = {
    "ok": 0, "running": 0, "exit": 1, "timeout": 2, "exception": 3, "crashed": 4,
}  # fmt: skip


def merge_traces(
    ranks: dict[int, Trace],
    *,
    exit_code: int | None = None,
    ended_at: dict[int, float] | None = None,
    facts: dict[int, RankFacts] | None = None,
    stopped: bool = False,
) -> Trace:
    """One trace of all ranks; variables carry ``ranks`` when more than one rank bound them.

    The run's exception is the first rank to fail (by ``ended_at``): when one rank raises,
    the others usually fail next on a closed connection. Every failing rank also gets a
    ``rank_exception`` finding at its line, unless a collective finding tells its failure
    as a consequence. ``facts``: what else each rank left (its collectives, how it ended);
    ``stopped``: the launcher stopped the ranks (a time limit, a hang, a cancel, Ctrl-C)."""
    if not ranks:
        raise ValueError("no rank traces to merge")
    facts = facts or {}
    order = sorted(ranks)
    first = ranks[order[0]]
    lines, divergences = _merge_lines(ranks, order)
    verdict = check_collectives(ranks, facts, divergences, stopped=stopped)
    divergences = _one_per_cause(
        [d for i, d in enumerate(divergences) if i not in verdict.explained_divergences]
    )
    failed = _failed_ranks(ranks, order, ended_at or {})
    exception, rank_exceptions = _exceptions(ranks, failed)
    if exception is not None and failed and failed[0] in verdict.explained_ranks:
        exception = _as_consequence(exception, failed[0], verdict.findings[0])
    rank_exceptions = [f for f in rank_exceptions if f.rank not in verdict.explained_ranks]
    own = [
        f
        for f in _rank_findings(ranks, order)
        if not _about_a_collective(f, facts) and not _consequence(f, ranks, verdict)
    ]
    return Trace(
        argv=first.argv,
        python=first.python,
        tracing=first.tracing,
        duration_s=max(t.duration_s for t in ranks.values()),
        status=_run_status(ranks, order, failed),
        exit_code=exit_code if exit_code is not None else max(t.exit_code for t in ranks.values()),
        exception=exception,
        lines=tuple(lines),
        findings=(*verdict.findings, *divergences, *own, *rank_exceptions),
        modules=tuple(
            replace(module, rank=rank) if len(ranks) > 1 else module
            for rank in order
            for module in ranks[rank].modules
        ),  # each rank's own tree: shapes per rank
        detail=f"{len(ranks)} ranks",
        ranks=tuple(rank_end(r, ranks[r], facts[r]) for r in order if r in facts)
        if len(ranks) > 1
        else (),
        shape_only=_shape_only(ranks, order),
        memory=_memory(ranks, order),
    )


def _shape_only(ranks: dict[int, Trace], order: list[int]) -> ShapeOnlyRun | None:
    """A shape-only run's facts: the ranks' stand-ins, per line the most any rank made."""
    runs = [run for r in order if (run := ranks[r].shape_only) is not None]
    if not runs:
        return None
    most: dict[tuple[str, int], SimulatedLine] = {}
    for run in runs:
        for line in run.simulated:
            known = most.get((line.file, line.line))
            if known is None or line.values + line.decisions > known.values + known.decisions:
                most[(line.file, line.line)] = line
    return ShapeOnlyRun(runs[0].simulated_cuda, tuple(most[key] for key in sorted(most)))


def _memory(ranks: dict[int, Trace], order: list[int]) -> MemoryReport | None:
    """The ranks' memory: each rank's device peaks (its own: its shards, what it gathered),
    per line and the run's FLOPs the most any rank had."""
    reports = [(r, report) for r in order if (report := ranks[r].memory) is not None]
    if not reports:
        return None
    several = len(ranks) > 1
    lines: dict[tuple[str, int, str], LineCost] = {}
    for _, report in reports:
        for cost in report.lines:
            key = (cost.file, cost.line, cost.device)
            known = lines.get(key)
            if known is None or cost.peak_bytes > known.peak_bytes:
                lines[key] = cost
    return MemoryReport(
        flops=max(report.flops for _, report in reports),
        budget_bytes=reports[0][1].budget_bytes,
        devices=tuple(
            replace(peak, rank=rank) if several else peak
            for rank, report in reports
            for peak in report.devices
        ),
        lines=tuple(lines[key] for key in sorted(lines)),
    )


def _as_consequence(exception: ExceptionInfo, rank: int, cause: Finding) -> ExceptionInfo:
    """The run's exception, when a collective finding tells why it was raised: short, and
    pointing at that finding."""
    short = short_error(f"{exception.type}: {exception.message.removeprefix(f'[rank {rank}] ')}")
    message = short.removeprefix(f"{exception.type}: ")
    where = f"{os.path.basename(cause.file)}:{cause.line}"
    after = (
        f"rank {cause.rank} died"
        if cause.kind == "rank_exception"
        else "the " + (cause.kind.replace("_", " "))
    )
    return replace(exception, message=f"[rank {rank}] {message} (after {after} at {where})")


def _consequence(finding: Finding, ranks: dict[int, Trace], verdict: Verdict) -> bool:
    """A rank's error where it raised as a consequence a collective finding tells (its
    dropped connection inside DDP's backward)."""
    rank = finding.rank
    if finding.severity != "error" or rank not in verdict.explained_ranks or rank is None:
        return False
    exc = ranks[rank].exception
    return exc is not None and (exc.file, exc.line) == (finding.file, finding.line)


def _about_a_collective(finding: Finding, facts: dict[int, RankFacts]) -> bool:
    """A rank's error at a collective that failed or hung there: the collective's failure
    (a dropped connection read as a size error), which the collective findings and the
    rank's ending tell."""
    if finding.severity != "error" or finding.rank is None or finding.rank not in facts:
        return False
    return any(
        (c.file, c.line) == (finding.file, finding.line) and c.state in ("failed", "waiting")
        for c in facts[finding.rank].calls
    )


def _merge_lines(
    ranks: dict[int, Trace], order: list[int]
) -> tuple[list[TracedLine], list[Finding]]:
    """Every line any rank ran, in file and line order, and where ranks disagree on it."""
    by_line: dict[tuple[str, int], dict[int, TracedLine]] = {}
    for rank in order:
        for line in ranks[rank].lines:
            by_line.setdefault((line.file, line.line), {})[rank] = line
    lines: list[TracedLine] = []
    findings: list[Finding] = []
    for (file, number), per_rank in sorted(by_line.items()):
        names: dict[str, dict[int, TracedVar]] = {}
        for rank, line in per_rank.items():
            for var in line.vars:
                names.setdefault(var.name, {})[rank] = var
        merged_vars = []
        for name, values in names.items():
            rank_values = _rank_values(values)
            lead = values[min(values)]
            merged_vars.append(replace(lead, ranks=rank_values if len(ranks) > 1 else ()))
            if len({(v.shape, v.dtype, v.device) for v in rank_values}) > 1:
                findings.append(_divergence(file, number, name, rank_values))
        lines.append(
            TracedLine(
                file=file,
                line=number,
                hits=max(line.hits for line in per_rank.values()),
                sampled=any(line.sampled for line in per_rank.values()),
                vars=tuple(merged_vars),
            )
        )
    return lines, findings


def _rank_values(values: dict[int, TracedVar]) -> tuple[RankValue, ...]:
    """One variable's value on each rank that bound it, by rank."""
    return tuple(
        RankValue(
            rank=r,
            shape=v.shape,
            dtype=v.dtype,
            device=v.device,
            requires_grad=v.requires_grad,
            hits=v.hits,
            local_shape=v.local_shape,
        )
        for r, v in sorted(values.items())
    )


def _divergence(file: str, number: int, name: str, values: tuple[RankValue, ...]) -> Finding:
    """The ``rank_divergence`` warning: one operand per rank, each rank's own value."""
    return Finding(
        kind="rank_divergence",
        severity="warning",
        file=file,
        line=number,
        operands=tuple(
            Operand(
                name=name,
                shape=v.shape,
                dtype=v.dtype,
                device=v.device,
                requires_grad=v.requires_grad,
                file=file,
                line=number,
                rank=v.rank,
            )
            for v in values
        ),
    )


def _one_per_cause(divergences: list[Finding]) -> list[Finding]:
    """A divergence that differs the way an earlier one does (the same sizes on the same
    ranks: the uneven shard's 8 and 7 rows) is its consequence: a step of the earlier one's
    chain, not a finding of its own."""
    kept: list[tuple[Finding, set[tuple[tuple[int, int], ...]]]] = []
    for finding in divergences:
        signature = _differing_sizes(finding)
        for index, (cause, cause_signature) in enumerate(kept):
            if signature & cause_signature and cause.file == finding.file:
                step = divergence_step(finding)
                kept[index] = (replace(cause, chain=(*cause.chain, step)), cause_signature)
                break
        else:
            kept.append((finding, signature))
    return [finding for finding, _ in kept]


def _differing_sizes(finding: Finding) -> set[tuple[tuple[int, int], ...]]:
    """For each dim whose size differs between ranks: ((rank, size), ...); the ranks' ranks
    when those differ."""
    shapes = [(o.rank or 0, o.shape or ()) for o in finding.operands]
    if len({len(shape) for _, shape in shapes}) != 1:
        return {tuple((rank, len(shape)) for rank, shape in shapes)}
    found = set()
    for dim in range(len(shapes[0][1])):
        sizes = tuple((rank, shape[dim]) for rank, shape in shapes)
        if len({size for _, size in sizes}) > 1:
            found.add(sizes)
    return found


def _rank_findings(ranks: dict[int, Trace], order: list[int]) -> list[Finding]:
    """Each rank's own findings, the same finding on every rank shown once."""
    seen: set[Finding] = set()
    findings: list[Finding] = []
    for rank in order:
        for finding in ranks[rank].findings:
            if finding not in seen:
                seen.add(finding)
                findings.append(replace(finding, rank=rank) if len(ranks) > 1 else finding)
    return findings


def _failed_ranks(
    ranks: dict[int, Trace], order: list[int], ended_at: dict[int, float]
) -> list[int]:
    """The ranks that raised, the first to end first (ties and unknown ends by rank)."""
    failed = [r for r in order if ranks[r].exception is not None]
    failed.sort(key=lambda r: (ended_at.get(r, float("inf")), r))
    return failed


def _exceptions(
    ranks: dict[int, Trace], failed: list[int]
) -> tuple[ExceptionInfo | None, list[Finding]]:
    """The run's exception (the first failing rank's, named) and a ``rank_exception``
    finding at each failing rank's line."""
    exception: ExceptionInfo | None = None
    findings: list[Finding] = []
    for rank in failed:
        exc = ranks[rank].exception
        assert exc is not None
        if exception is None:
            exception = replace(exc, message=f"[rank {rank}] {exc.message}")
        stopped_shape_only = ranks[rank].status == "shape_only_stop"  # not the program's error
        if len(ranks) > 1 and exc.file and exc.line is not None and not stopped_shape_only:
            first_line = exc.message.strip().splitlines()[0] if exc.message.strip() else ""
            findings.append(
                Finding(
                    kind="rank_exception",
                    severity="error",
                    file=exc.file,
                    line=exc.line,
                    error=f"{exc.type}: {first_line}",
                    rank=rank,
                )
            )
    return exception, findings


def _run_status(ranks: dict[int, Trace], order: list[int], failed: list[int]) -> RunStatus:
    """The worst status of the ranks that ended on their own.

    A rank that ended without a record or a crash report while another rank had raised
    was stopped by torchrun because of that rank: the first failure is the run's status."""
    stopped_by_others = {
        r for r in order if failed and ranks[r].status == "crashed" and ranks[r].exception is None
    }
    statuses = [ranks[r].status for r in order if r not in stopped_by_others]
    return max(statuses, key=lambda s: _SEVERITY.get(s, 0))
