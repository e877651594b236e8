"""The ``sys.settrace`` gate (``_library_gate.c``): tracing off while library code runs.

Built by ``pip install`` on CPython 3.11 where a C compiler is found, and loaded only by the
exact CPython it was compiled for (the module checks ``Py_Version`` when it loads). Whether a
run uses it is chosen with the backend (:func:`shapelens.engine.backends.choice.choose_backend`);
without it the tracer installs its Python function with ``sys.settrace`` (same records,
slower: the whole program runs in the interpreter's tracing mode).
"""

from __future__ import annotations

import importlib
import sys
import sysconfig
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

    def switch_off(self, code: CodeType, line: int) -> bool:
        """Drop the events of ``line`` of ``code`` in C until :meth:`switch_all_on`; False if
        it cannot (not a line of the code)."""

    def switch_all_on(self) -> None:
        """Every line switched off gets its events again."""

    def __call__(self, frame: FrameType, event: str, arg: Any) -> Any: ...


GateType = Callable[[dict[int, Any], Callable[[FrameType, str, Any], Any]], Gate]
"""``_library_gate.Gate``: a gate over the statement recorder's code table and the Python
global trace function."""


def built_gate() -> GateType | None:
    """The gate's type, or None where it cannot load here (:func:`why_no_gate` says why)."""
    return _load()[0]


def why_no_gate() -> str | None:
    """Why this interpreter has no gate, in a few words; None where it has one."""
    return _load()[1]


def _load() -> tuple[GateType | None, str | None]:
    if sys.implementation.name != "cpython" or sys.version_info[:2] != (3, 11):
        return None, f"built for CPython 3.11 only (this is {_this_python()})"
    try:  # not `from package import name`, which words a missing module as any ImportError
        _library_gate = importlib.import_module("shapelens.engine.backends._library_gate")
    except ModuleNotFoundError:
        # The import system looks only for this interpreter's ABI tag (cpython-311-<platform>):
        # a gate compiled for another platform is never even opened.
        suffix = sysconfig.get_config_var("EXT_SUFFIX")
        return None, (
            f"not built for this interpreter (no _library_gate{suffix}: pip found no C compiler "
            "at install, or this copy ships without it, as the VS Code extension's does)"
        )
    except ImportError as err:  # built for another 3.11.x, or an unknown frame layout
        return None, str(err)
    gate: GateType = _library_gate.Gate
    return gate, None


def _this_python() -> str:
    return f"{sys.implementation.name} {sys.version.split()[0]}"


def hooked() -> bool:
    """Whether the interpreter evaluates frames through a gate's hook (linked by the first
    gate installed; unlinked when it is removed, unless another hook came in front)."""
    try:
        from shapelens.engine.backends import _library_gate  # type: ignore[attr-defined]
    except ImportError:
        return False
    return bool(_library_gate.hooked())
