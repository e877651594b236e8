"""Every rule of the engine, registered once: one line each in :data:`RULES`.

A rule is a :class:`~shapelens.engine.findings.rule.Rule` in its own module here: the
finding kinds it makes, the events it subscribes to, and the findings setting that
switches it. :func:`rules_for` is the one place where rules are switched on and off
(``docs/architecture.md`` shows how to add one).
"""

from __future__ import annotations

from typing import Any

from shapelens.engine.findings.context import RunFacts
from shapelens.engine.findings.rule import Rule
from shapelens.engine.findings.rules.broadcast import BroadcastRule
from shapelens.engine.findings.rules.degenerate import DegenerateRule
from shapelens.engine.findings.rules.errors import ErrorRule
from shapelens.engine.findings.rules.library_warnings import LibraryWarningRule
from shapelens.engine.findings.rules.nonfinite import NonfiniteRule
from shapelens.engine.findings.rules.out_of_memory import OutOfMemoryRule
from shapelens.engine.findings.rules.shape_comment import ShapeCommentRule
from shapelens.settings.groups import FindingsConfig

RULES: tuple[type[Rule[Any]], ...] = (
    BroadcastRule,
    ErrorRule,
    NonfiniteRule,
    LibraryWarningRule,
    DegenerateRule,
    ShapeCommentRule,
    OutOfMemoryRule,
)
"""In the order they hear an event (the errors rule before others of an exception)."""


def rules_for(config: FindingsConfig, facts: RunFacts) -> list[Rule[Any]]:
    """The rules ``config`` switches on, each made for this run."""
    return [rule(facts) for rule in RULES if rule.setting is None or getattr(config, rule.setting)]
