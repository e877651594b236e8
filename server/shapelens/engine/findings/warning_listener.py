"""Where a warning came from: ``warnings.showwarning`` wrapped while tracing (restored
after), and the innermost frame of user code that was running when it was shown."""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable
from types import CodeType, FrameType
from typing import Any

from shapelens.engine import SHAPELENS_DIR
from shapelens.engine.recording.code_info import CodeInfo

OnWarning = Callable[[str, type, str], None]
"""``(message, category, filename)``: a warning is being shown, located in ``filename``."""


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
                listener.on_warning(str(message), category, filename)
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
    SHAPELENS_DIR,
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
