"""The one interface of a finding's rule.

A rule is handed what it observes of the running program (a non-finite value read, a line
about to run or an op it ran, a library warning, an exception), each kind of observation a
small record of its own module, and answers with the findings it makes of it. Deciding
when to observe (sampling, the op watch, which exception ends the run) and recording the
findings stays with the engine (``engine/statement_recorder.py``), so a rule runs alone in a
test: observation in, :class:`Finding` out.
"""

from __future__ import annotations

from typing import Protocol, TypeVar

from shapelens.engine.findings.finding import Finding

Seen = TypeVar("Seen", contravariant=True)


class Rule(Protocol[Seen]):
    """One finding kind's rule (``findings/<kind>.py``)."""

    def observe(self, seen: Seen, /) -> list[Finding]:
        """The findings ``seen`` makes (none, most of the time)."""
        ...
