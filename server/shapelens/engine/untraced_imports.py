"""Imports of library modules run untraced (the ``sys.settrace`` backend).

Under ``sys.settrace`` every Python call is a call event, and ``import torch`` makes about a
million of them: traced, it takes twice as long, though none of that code is the user's.
While installed, an ``import`` statement (or ``importlib.import_module``, which torch's lazy
submodules use) that loads a module outside user code runs with the tracer paused; user
modules (and anything already imported) import as usual.
"""

from __future__ import annotations

import builtins
import importlib
import importlib.machinery
import sys
from collections.abc import Callable, Mapping
from typing import Any


class UntracedImports:
    """Wraps ``builtins.__import__`` to pause tracing around imports of library modules."""

    def __init__(
        self,
        is_user_file: Callable[[str], bool],
        pause: Callable[[], None],
        resume: Callable[[], None],
    ) -> None:
        self._is_user_file = is_user_file
        self._pause = pause
        self._resume = resume
        self._original: Callable[..., Any] | None = None
        self._original_import_module: Callable[..., Any] = importlib.import_module
        self._paused = 0
        self._user_packages: dict[str, bool] = {}
        """Top-level package → whether it is user code (what ``_loads_user_code`` found)."""

    def install(self) -> None:
        self._original = builtins.__import__
        self._original_import_module = importlib.import_module
        builtins.__import__ = self._import
        importlib.import_module = self._import_module  # torch's lazy submodules use it

    def remove(self) -> None:
        """Put the originals back; if someone wrapped ours since, ours just pass through."""
        original, self._original = self._original, None
        if original is not None and builtins.__import__ == self._import:
            builtins.__import__ = original
        if importlib.import_module == self._import_module:
            importlib.import_module = self._original_import_module

    def _import_module(self, name: str, package: str | None = None) -> Any:
        original = self._original_import_module
        if self._original is None or self._paused or name in sys.modules:
            return original(name, package)
        level = len(name) - len(name.lstrip("."))
        if self._loads_user_code(name, {"__package__": package}, level):
            return original(name, package)
        return self._untraced(original, name, package)

    def _import(
        self,
        name: str,
        globals: Mapping[str, Any] | None = None,  # __import__'s own parameter names
        locals: Mapping[str, Any] | None = None,
        fromlist: Any = (),
        level: int = 0,
    ) -> Any:
        original = self._original or _builtin_import
        if self._original is None or self._paused or _loaded(name, globals, fromlist, level):
            return original(name, globals, locals, fromlist, level)
        if self._loads_user_code(name, globals, level):
            return original(name, globals, locals, fromlist, level)
        return self._untraced(original, name, globals, locals, fromlist, level)

    def _untraced(self, function: Callable[..., Any], *args: Any) -> Any:
        self._paused += 1
        self._pause()
        try:
            return function(*args)
        finally:
            self._paused -= 1
            if not self._paused:
                self._resume()

    def _loads_user_code(self, name: str, globals: Mapping[str, Any] | None, level: int) -> bool:
        """Whether the module's package is user code (unknown origins count as user code)."""
        if level:  # a relative import: inside the importing module's own package
            package = (globals or {}).get("__package__") or ""
            top = package.partition(".")[0]
        else:
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


def _loaded(name: str, globals: Mapping[str, Any] | None, fromlist: Any, level: int) -> bool:
    """Whether the import only looks up what is loaded already (torch's functions import
    inside their bodies, ``from .optimizer import ...`` on every ``step()``): no pause."""
    if level == 0:
        return name in sys.modules
    package = (globals or {}).get("__package__")
    if not package:
        return False
    parts = package.rsplit(".", level - 1)
    if len(parts) < level:
        return False  # beyond the top-level package: the import raises, as it should
    module = sys.modules.get(f"{parts[0]}.{name}" if name else parts[0])
    if module is None:
        return False
    names = vars(module)  # not hasattr: a lazy module's __getattr__ would import, traced
    return all(item in names for item in fromlist or ())


_builtin_import = builtins.__import__
