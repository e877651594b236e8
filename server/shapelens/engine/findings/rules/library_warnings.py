"""``library_warning``: a warning torch (or numpy) raised while a user line ran, at that line.

``F.mse_loss(pred, target)`` with (32, 1) and (32,) broadcasts inside torch, which says so
("Using a target size ... that is different to the input size") in a log line far from the
code. ShapeLens puts it on the innermost user line that was running, once per line and
message, with the tensors that line names. Warnings that mean a wrong result (shapes,
broadcasting, an implicit softmax dim, ``.grad`` of a non-leaf) are warnings; the rest
(deprecations, performance hints) are ``info``: they are not bugs.
The user still sees every warning exactly as before: we only listen.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable

from shapelens.engine.findings.context import RunFacts, inputs_of
from shapelens.engine.findings.events import Warned
from shapelens.engine.findings.rule import Rule
from shapelens.lazy_regex import LazyPattern
from shapelens.trace.finding import Finding, Severity

BUG_WARNING = LazyPattern(
    r"(target|input) size|broadcast|implicit dimension choice|shapes? (do not|don't) match"
    r"|size mismatch|mismatch|not a leaf Tensor",
    re.IGNORECASE,
)
"""Warnings that mean the result is wrong (a silent broadcast, softmax over the wrong dim,
``.grad`` of a non-leaf tensor, which is None), as opposed to notices."""
OnWarning = Callable[[str, type], None]


_DEPRECATIONS = (DeprecationWarning, PendingDeprecationWarning, FutureWarning)


def severity_of(message: str, category: type) -> Severity:
    if issubclass(category, _DEPRECATIONS):
        return "info"
    return "warning" if BUG_WARNING.search(message) else "info"


class LibraryWarningRule(Rule[Warned]):
    """``library_warning``: a library's warning on the user line that was running, once per
    line and message."""

    kinds = ("library_warning",)
    events = (Warned,)
    setting = "warnings"

    def __init__(self, facts: RunFacts) -> None:
        super().__init__(facts)
        self._warned: set[tuple[str, int, str]] = set()

    def _in_user_code(self, filename: str) -> bool:
        return bool(filename) and self.facts.scope.user_file(filename) is not None

    def observe(self, seen: Warned, /) -> list[Finding]:
        info, frame, message = seen.info, seen.frame, seen.message
        line = info.statement_of.get(frame.f_lineno, frame.f_lineno)
        if seen.issued_here and _calls_warn(info.source.statements.get(line)):
            return []  # the user's own warnings.warn(...)
        if issubclass(seen.category, _DEPRECATIONS) and not self._in_user_code(seen.filename):
            return []  # a library calling another's deprecated API: nothing the user can change
        first = message.strip().splitlines()[0] if message.strip() else seen.category.__name__
        key = (info.file, line, first)
        if key in self._warned:
            return []
        self._warned.add(key)
        inputs = inputs_of(frame, info, line, None)
        return [
            Finding(
                kind="library_warning",
                severity=severity_of(first, seen.category),
                file=info.file,
                line=line,
                expression=info.source.statement_text(line) or None,
                operands=self.facts.operands(inputs),
                error=f"{seen.category.__name__}: {first}",
            )
        ]


def _calls_warn(statement: ast.AST | None) -> bool:
    """The statement calls ``warnings.warn`` (or a bare ``warn``) itself."""
    if statement is None:
        return False
    for node in ast.walk(statement):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name in ("warn", "warn_explicit", "showwarning"):
                return True
    return False
