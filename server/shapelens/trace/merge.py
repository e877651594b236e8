"""Merging per-rank traces into one: values per rank, and where ranks stop agreeing."""

from __future__ import annotations

from dataclasses import replace

from shapelens.trace.model import (
    ExceptionInfo,
    Finding,
    Operand,
    RankValue,
    RunStatus,
    Trace,
    TracedLine,
    TracedVar,
)

_SEVERITY: dict[RunStatus, int] = {
    "ok": 0, "running": 0, "exit": 1, "timeout": 2, "exception": 3, "crashed": 4,
}  # fmt: skip


def merge_traces(
    ranks: dict[int, Trace],
    *,
    exit_code: int | None = None,
    ended_at: dict[int, float] | None = None,
) -> Trace:
    """One trace of all ranks; variables carry ``ranks`` when more than one rank bound them.

    The run's exception is the first rank to fail (by ``ended_at``): when one rank raises,
    the others usually fail next on a closed connection. Every failing rank also gets a
    ``rank_exception`` finding at its line."""
    if not ranks:
        raise ValueError("no rank traces to merge")
    order = sorted(ranks)
    first = ranks[order[0]]
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
            lead = values[min(values)]
            rank_values = tuple(
                RankValue(
                    rank=r,
                    shape=v.shape,
                    dtype=v.dtype,
                    device=v.device,
                    requires_grad=v.requires_grad,
                    hits=v.hits,
                )
                for r, v in sorted(values.items())
            )
            merged_vars.append(replace(lead, ranks=rank_values if len(ranks) > 1 else ()))
            distinct = {(v.shape, v.dtype, v.device) for v in rank_values}
            if len(distinct) > 1:
                findings.append(
                    Finding(
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
                            for v in rank_values
                        ),
                    )
                )
        lines.append(
            TracedLine(
                file=file,
                line=number,
                hits=max(line.hits for line in per_rank.values()),
                sampled=any(line.sampled for line in per_rank.values()),
                vars=tuple(merged_vars),
            )
        )
    seen: set[Finding] = set()
    for rank in order:
        for finding in ranks[rank].findings:
            if finding not in seen:  # the same finding on every rank is shown once
                seen.add(finding)
                findings.append(replace(finding, rank=rank) if len(ranks) > 1 else finding)
    ended_at = ended_at or {}
    failed = [r for r in order if ranks[r].exception is not None]
    failed.sort(key=lambda r: (ended_at.get(r, float("inf")), r))
    exception: ExceptionInfo | None = None
    for rank in failed:
        exc = ranks[rank].exception
        assert exc is not None
        if exception is None:
            exception = replace(exc, message=f"[rank {rank}] {exc.message}")
        if len(ranks) > 1 and exc.file is not None and exc.line is not None:
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
    # A rank that ended without a record or a crash report while another rank had raised
    # was stopped by torchrun because of that rank: the first failure is the run's status.
    stopped_by_others = {
        r for r in order if failed and ranks[r].status == "crashed" and ranks[r].exception is None
    }
    statuses = [ranks[r].status for r in order if r not in stopped_by_others]
    worst = max(statuses, key=lambda s: _SEVERITY.get(s, 0))
    return Trace(
        argv=first.argv,
        python=first.python,
        duration_s=max(t.duration_s for t in ranks.values()),
        status=worst,
        exit_code=exit_code if exit_code is not None else max(t.exit_code for t in ranks.values()),
        exception=exception,
        lines=tuple(lines),
        findings=tuple(findings),
        modules=tuple(
            replace(module, rank=rank) if len(ranks) > 1 else module
            for rank in order
            for module in ranks[rank].modules
        ),  # each rank's own tree: shapes per rank
        detail=f"{len(ranks)} ranks",
    )
