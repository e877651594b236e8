"""Events to the rules that subscribed to them.

The engine asks :meth:`Dispatcher.wants` before it makes an event (an event nobody wants
is never built, and what it needs watched is not watched), and hands it to
:meth:`Dispatcher.emit`, which returns the rules' findings for the engine to record.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from shapelens.engine.findings.events import Event, Watch
from shapelens.engine.findings.rule import Rule
from shapelens.trace.finding import Finding


class Dispatcher:
    """The rules of one run, by the events they subscribed to."""

    def __init__(self, rules: Iterable[Rule[Any]]) -> None:
        self.rules = tuple(rules)
        self._subscribers: dict[type[Event], list[Rule[Any]]] = {}
        for rule in self.rules:
            for event in rule.events:
                self._subscribers.setdefault(event, []).append(rule)

    def wants(self, event: type[Event]) -> bool:
        """Whether some rule still listens to ``event``."""
        return bool(self._subscribers.get(event))

    def watches(self, watch: Watch) -> bool:
        """Whether some wanted event needs ``watch`` (the op watch's calls, or operators)."""
        return any(event.watches == watch and rules for event, rules in self._subscribers.items())

    def emit(self, event: Event) -> list[Finding]:
        """``event`` to its subscribers, in registration order: the findings they made."""
        rules = self._subscribers.get(type(event))
        if not rules:
            return []
        found: list[Finding] = []
        for rule in tuple(rules):
            found.extend(rule.observe(event))
            if rule.finished:
                self._retire(rule)
        return found

    def _retire(self, rule: Rule[Any]) -> None:
        for subscribers in self._subscribers.values():
            if rule in subscribers:
                subscribers.remove(rule)
