"""The one interface of a finding's rule.

A rule subscribes to the events it needs (:mod:`.events`: a statement checked, an operator
or a call that ran, values that changed, a commented statement that ended, a non-finite
value read, an exception, a warning, memory that ran out) and answers each with the
findings it makes of it. Deciding when to observe (sampling, the op watch, which exception
ends the run) and recording the findings stays with the engine
(``engine/recording/statement_recorder.py``), so a rule runs alone in a test: event in,
:class:`~shapelens.trace.finding.Finding` out. A rule is registered in
``engine/findings/rules/__init__.py``: one line.
"""

from __future__ import annotations

from typing import ClassVar, Generic, TypeVar

from shapelens.engine.findings.context import RunFacts
from shapelens.engine.findings.events import Event
from shapelens.trace.finding import Finding, FindingKind

Seen = TypeVar("Seen", bound=Event, contravariant=True)


class Rule(Generic[Seen]):
    """One finding kind's rule (``findings/rules/<kind>.py``)."""

    kinds: ClassVar[tuple[FindingKind, ...]]
    """The finding kinds it makes."""
    events: ClassVar[tuple[type[Event], ...]]
    """The events it subscribes to."""
    setting: ClassVar[str | None]
    """The :class:`~shapelens.settings.groups.FindingsConfig` switch that turns it on and
    off (None: always on when the run can see its events)."""

    def __init__(self, facts: RunFacts) -> None:
        self.facts = facts
        self.finished = False
        """Set once the rule has said all it will: it gets no more events."""

    def observe(self, seen: Seen, /) -> list[Finding]:
        """The findings ``seen`` makes (none, most of the time)."""
        raise NotImplementedError
