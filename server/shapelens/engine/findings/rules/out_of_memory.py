"""``out_of_memory``: the line of a shape-only run where the simulated GPU's live tensor
memory first went past the budget (``--gpu-memory``, ``--gpu``). The run goes on: the user
wants the whole picture (the run's peak, each line's figures), so this is a finding, not an
exception."""

from __future__ import annotations

from shapelens.engine.findings.events import RanOutOfMemory
from shapelens.engine.findings.rule import Rule
from shapelens.trace.finding import Finding, MemoryFacts


class OutOfMemoryRule(Rule[RanOutOfMemory]):
    kinds = ("out_of_memory",)
    events = (RanOutOfMemory,)
    setting = None  # on whenever a budget is set: the run asked for it

    def observe(self, seen: RanOutOfMemory, /) -> list[Finding]:
        event = seen.event
        file, line = event.where
        return [
            Finding(
                kind="out_of_memory",
                severity="error",
                file=file,
                line=line,
                expression=seen.expression,
                memory=MemoryFacts(
                    device=event.device,
                    live_bytes=event.live_bytes,
                    budget_bytes=event.budget_bytes,
                    breakdown=tuple(event.breakdown.items()),
                ),
            )
        ]
