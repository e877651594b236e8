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

import contextlib
import re
import warnings
from collections.abc import Callable
from typing import Any

BUG_WARNING = re.compile(
    r"(target|input) size|broadcast|implicit dimension choice|shapes? (do not|don't) match"
    r"|size mismatch|mismatch|not a leaf Tensor",
    re.IGNORECASE,
)
"""Warnings that mean the result is wrong (a silent broadcast, softmax over the wrong dim,
``.grad`` of a non-leaf tensor, which is None), as opposed to notices."""
OnWarning = Callable[[str, type], None]


def severity_of(message: str, category: type) -> str:
    if issubclass(category, (DeprecationWarning, PendingDeprecationWarning, FutureWarning)):
        return "info"
    return "warning" if BUG_WARNING.search(message) else "info"


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
