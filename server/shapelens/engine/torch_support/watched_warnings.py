"""The warnings of a torch call made through one of our torch function modes, shown as
without it.

The op watch's mode and a shape-only run's sit between the program and torch: torch's
``warnings.warn(..., stacklevel=2)`` then names the mode's frame, a C++ warning the
innermost Python frame (the mode's again), and every warning of every such call shares
that one location, so Python's once-per-location filter shows the first and swallows the
others. The mode keeps a call's warnings aside and shows each again at the program's own
frame, through the program's filters and that module's registry.
"""

from __future__ import annotations

import os
import warnings
from types import FrameType
from typing import Any, cast

from shapelens.engine import SHAPELENS_DIR

_ALWAYS = ("always", None, Warning, None, 0)


class shown_at_the_caller:  # a function to its callers: `with shown_at_the_caller(...)`
    """The warnings of the call of ``func`` that the block makes, kept aside, then shown as
    if ``caller`` had made it without the mode in between (:func:`_reissue`). A class, not
    a generator: it wraps every watched torch call (1 µs less a call than ``contextmanager``).

    The filter goes in (and out) in place: ``catch_warnings`` would bump the filters'
    version, and every module's once-per-location registry would start over."""

    __slots__ = ("caller", "func", "saved", "shown")

    def __init__(self, func: Any, caller: FrameType) -> None:
        self.func, self.caller = func, caller
        self.shown: list[warnings.WarningMessage] = []
        self.saved: Any = None

    def _keep(self, *args: Any, **kwargs: Any) -> None:  # showwarning's (message, category, ...)
        self.shown.append(warnings.WarningMessage(*args, **kwargs))

    def __enter__(self) -> None:
        self.saved = warnings.showwarning
        _filters().insert(0, _ALWAYS)
        warnings.showwarning = self._keep

    def __exit__(self, *exc: object) -> None:
        warnings.showwarning = self.saved
        filters = _filters()
        for index, entry in enumerate(filters):
            if entry is _ALWAYS:
                del filters[index]
                break
        if self.shown:
            _reissue(self.shown, self.func, self.caller)


def _filters() -> list[Any]:
    """The warnings module's filter list itself (typeshed calls it a Sequence)."""
    return cast("list[Any]", warnings.filters)  # a string: no alias built per call


def _reissue(shown: list[warnings.WarningMessage], func: Any, caller: FrameType) -> None:
    """Warnings a watched call gave, shown as plain Python shows them: where they point
    at our modules (torch's ``stacklevel`` counted a mode's frame, a C++ warning names the
    innermost Python frame) they point at the frame that made the call instead,
    and the program's filters and that module's registry decide (once per location)."""
    frame = _calling_frame(func, caller)
    for message in shown:
        filename, lineno, where = message.filename, message.lineno, None
        if frame is not None and filename.startswith(_OURS):
            filename, lineno, where = frame.f_code.co_filename, frame.f_lineno, frame.f_globals
        if where is None:
            warnings.warn_explicit(message.message, message.category, filename, lineno)
            continue
        # No module_globals: the source line comes from the file, as for a plain warn (3.12
        # refuses globals with a None __spec__ and no __loader__: a notebook's, a runpy main).
        warnings.warn_explicit(
            message.message, message.category, filename, lineno,
            module=where.get("__name__"), registry=where.setdefault("__warningregistry__", {}),
        )  # fmt: skip


def _calling_frame(func: Any, caller: FrameType | None) -> FrameType | None:
    """The frame that called ``func`` as the program wrote it: past torch's hand-over to the
    mode (``handle_torch_function``), an outer mode of ours that handed the call on, and the
    outer call of ``func`` that handed it over."""
    code = getattr(func, "__code__", None)
    frame = caller
    while frame is not None and (
        frame.f_code.co_filename.endswith(_OVERRIDES_FILE)
        or frame.f_code.co_filename.startswith(_OURS)
    ):
        frame = frame.f_back
    if frame is not None and code is not None and frame.f_code is code:
        frame = frame.f_back
    return frame


_OVERRIDES_FILE = os.path.join("torch", "overrides.py")
_OURS = SHAPELENS_DIR + os.sep
