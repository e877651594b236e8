"""``out_of_memory``: the line of a shape-only run where the simulated GPU's live tensor
memory first went past the budget (``--gpu-memory``, ``--gpu``). The run goes on: the user
wants the whole picture (the run's peak, each line's figures), so this is a finding, not an
exception."""

from __future__ import annotations

from shapelens.engine.findings.finding import Finding, MemoryFacts
from shapelens.engine.memory.ledger import OutOfMemory


def out_of_memory_finding(event: OutOfMemory, expression: str | None) -> Finding:
    file, line = event.where
    return Finding(
        kind="out_of_memory",
        severity="error",
        file=file,
        line=line,
        expression=expression,
        memory=MemoryFacts(
            device=event.device,
            live_bytes=event.live_bytes,
            budget_bytes=event.budget_bytes,
            breakdown=tuple(event.breakdown.items()),
        ),
    )
