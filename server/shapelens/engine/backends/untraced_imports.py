"""Imports of library modules run untraced (both backends).

Under ``sys.settrace`` every Python call is a call event, and ``import torch`` makes about a
million of them: traced, it takes twice as long, though none of that code is the user's.
Under ``sys.monitoring`` each code object's first start and every exception is one (14,000
and 60,000 for ``import torch`` with ``torch._dynamo``). While installed, loading a module
outside user code runs with the tracer paused; user modules import as usual.

The hook is importlib's ``_find_and_load``, which the interpreter calls only when a module
is not loaded yet (``import``, ``from ... import``, ``importlib.import_module`` all go
through it): the ``import`` statements that torch runs inside its functions on every
training step find their module in ``sys.modules`` without reaching any Python code of ours.
"""

from __future__ import annotations

import importlib.machinery
import sys
from collections.abc import Callable
from typing import Any

_BOOTSTRAP = "_frozen_importlib"  # importlib._bootstrap, as the interpreter holds it
_HOOK = "_find_and_load"


class UntracedImports:
    """Wraps importlib's ``_find_and_load`` to pause tracing while a library module loads."""

    def __init__(
        self,
        is_user_file: Callable[[str], bool],
        pause: Callable[[], None],
        resume: Callable[[], None],
    ) -> None:
        self._is_user_file = is_user_file
        self._pause = pause
        self._resume = resume
        self._original: Callable[[str, Any], Any] | None = None
        self._paused = 0
        self._user_packages: dict[str, bool] = {}
        """Top-level package → whether it is user code (what ``_loads_user_code`` found)."""

    def install(self) -> None:
        bootstrap = sys.modules.get(_BOOTSTRAP)
        original = getattr(bootstrap, _HOOK, None)
        if not callable(original):
            return  # another interpreter's importlib: imports stay traced (slower, correct)
        self._original = original
        setattr(bootstrap, _HOOK, self._find_and_load)

    def remove(self) -> None:
        """Put the original back; if someone wrapped ours since, ours just passes through."""
        original, self._original = self._original, None
        bootstrap = sys.modules.get(_BOOTSTRAP)
        if original is not None and getattr(bootstrap, _HOOK, None) == self._find_and_load:
            setattr(bootstrap, _HOOK, original)

    def _find_and_load(self, name: str, import_: Any) -> Any:
        original = self._original or _original_find_and_load
        if (
            self._original is None
            or self._paused
            or name in sys.modules  # importlib.import_module of a loaded module
            or self._loads_user_code(name)
        ):
            return original(name, import_)
        self._paused += 1
        self._pause()
        try:
            return original(name, import_)
        finally:
            self._paused -= 1
            if not self._paused:
                self._resume()

    def _loads_user_code(self, name: str) -> bool:
        """Whether the module's package is user code (unknown origins count as user code)."""
        top = name.partition(".")[0]
        known = self._user_packages.get(top)
        if known is None:
            known = self._user_packages[top] = self._package_is_user_code(top)
        return known

    def _package_is_user_code(self, top: str) -> bool:
        module = sys.modules.get(top)
        if module is not None:
            origin = getattr(module, "__file__", None)
        else:
            try:
                spec = importlib.machinery.PathFinder.find_spec(top)
            except (ImportError, ValueError):
                return True
            if spec is None:  # a builtin, or found by another finder (editable installs)
                return top not in sys.builtin_module_names
            origin = spec.origin
        if not origin or origin in ("built-in", "frozen"):
            return False
        return self._is_user_file(origin)


_original_find_and_load: Callable[[str, Any], Any] = getattr(sys.modules[_BOOTSTRAP], _HOOK)
