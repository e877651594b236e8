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
import contextlib
import os
import re
import warnings
from collections.abc import Callable
from types import CodeType, FrameType
from typing import Any

from shapelens.engine.code_info import CodeInfo
from shapelens.engine.findings.context import RunFacts, inputs_of
from shapelens.engine.findings.finding import Finding, Severity

BUG_WARNING = re.compile(
    r"(target|input) size|broadcast|implicit dimension choice|shapes? (do not|don't) match"
    r"|size mismatch|mismatch|not a leaf Tensor",
    re.IGNORECASE,
)
"""Warnings that mean the result is wrong (a silent broadcast, softmax over the wrong dim,
``.grad`` of a non-leaf tensor, which is None), as opposed to notices."""
OnWarning = Callable[[str, type], None]


def severity_of(message: str, category: type) -> Severity:
    if issubclass(category, (DeprecationWarning, PendingDeprecationWarning, FutureWarning)):
        return "info"
    return "warning" if BUG_WARNING.search(message) else "info"


class Warned:
    """A warning is being shown while ``frame``, the innermost frame of user code, runs."""

    __slots__ = ("category", "frame", "info", "issued_here", "message")

    def __init__(
        self, *, message: str, category: type, frame: FrameType, info: CodeInfo, issued_here: bool
    ) -> None:
        self.message = message
        self.category = category
        self.frame = frame
        self.info = info
        self.issued_here = issued_here


class LibraryWarningRule:
    """``library_warning``: a library's warning on the user line that was running, once per
    line and message."""

    def __init__(self, facts: RunFacts) -> None:
        self.facts = facts
        self._warned: set[tuple[str, int, str]] = set()

    def observe(self, seen: Warned, /) -> list[Finding]:
        info, frame, message = seen.info, seen.frame, seen.message
        line = info.statement_of.get(frame.f_lineno, frame.f_lineno)
        if seen.issued_here and _calls_warn(info.source.statements.get(line)):
            return []  # the user's own warnings.warn(...)
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


class WarningListener:
    """Wraps ``warnings.showwarning`` (called for every warning that passes the filters);
    restores it on :meth:`stop` unless someone replaced it after us."""

    def __init__(self, on_warning: OnWarning) -> None:
        self.on_warning = on_warning
        self._previous: Any = None
        self._installed: Any = None

    def start(self) -> None:
        previous = self._previous = warnings.showwarning
        listener = self

        def showwarning(
            message: Warning | str,
            category: type[Warning],
            filename: str,
            lineno: int,
            file: Any = None,
            line: str | None = None,
        ) -> None:
            with contextlib.suppress(Exception):  # never an error in the user's program
                listener.on_warning(str(message), category)
            previous(message, category, filename, lineno, file, line)

        self._installed = showwarning
        warnings.showwarning = showwarning

    def stop(self) -> None:
        if self._installed is not None and warnings.showwarning is self._installed:
            warnings.showwarning = self._previous
        self._installed = None


# Frames of the warnings machinery and of ShapeLens itself, skipped to find who warned.
_OWN_FILES = (
    warnings.__file__,
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
)


def warned_from(
    start: FrameType | None, known: Callable[[CodeType], CodeInfo | None]
) -> tuple[FrameType, CodeInfo, bool] | None:
    """The innermost frame of user code that is running while a warning is shown, its
    code, and whether that frame issued the warning itself (no library code between)."""
    frame = start
    issuer: FrameType | None = None
    while frame is not None:
        if frame.f_code.co_filename.startswith(_OWN_FILES):
            frame = frame.f_back
            continue
        issuer = issuer or frame
        info = known(frame.f_code)
        if info is not None:
            return frame, info, issuer is frame
        frame = frame.f_back
    return None
