"""The ``sys.settrace`` gate (``_library_gate.c``): tracing off while library code runs.

Built by ``pip install`` on CPython 3.11 where a C compiler is found. Whether a run uses it
is chosen with the backend (:func:`shapelens.engine.backends.choose_backend`); without it the
tracer installs its Python function with ``sys.settrace`` (same records, slower: the whole
program runs in the interpreter's tracing mode).
"""

from __future__ import annotations

from collections.abc import Callable
from types import CodeType, FrameType
from typing import Any, Protocol


class Gate(Protocol):
    """What ``_library_gate.Gate(codes, global_function)`` offers."""

    def install(self) -> None:
        """Install for this thread: the gate's frame hook, and tracing on."""

    def uninstall(self) -> None:
        """Tracing off where it is ours, until ``install()`` (the hook passes through)."""

    def remove(self) -> None:
        """``uninstall()``, and frames evaluated as before the first ``install()``."""

    def watch(self, code: CodeType) -> None:
        """Calls of ``code`` (library code) go to the global function too."""

    def pause_watch(self, paused: bool) -> None:
        """While ``paused``, only the watched code's calls that user code makes do."""

    def __call__(self, frame: FrameType, event: str, arg: Any) -> Any: ...


GateType = Callable[[dict[int, Any], Callable[[FrameType, str, Any], Any]], Gate]
"""``_library_gate.Gate``: a gate over the recorder's code table and the Python global trace
function."""


def built_gate() -> GateType | None:
    """The gate's type, or None where it is not built (or does not know this interpreter's
    frame layout)."""
    try:
        from shapelens.engine import _library_gate  # type: ignore[attr-defined]
    except ImportError:
        return None
    gate: GateType = _library_gate.Gate
    return gate


def hooked() -> bool:
    """Whether the interpreter evaluates frames through a gate's hook (linked by the first
    gate installed; unlinked when it is removed, unless another hook came in front)."""
    try:
        from shapelens.engine import _library_gate  # type: ignore[attr-defined]
    except ImportError:
        return False
    return bool(_library_gate.hooked())
