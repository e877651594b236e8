"""Run a callback once a module has been imported: a run that never imports torch pays
nothing for what ShapeLens does to torch."""

from __future__ import annotations

import contextlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
from collections.abc import Callable, Sequence
from types import ModuleType


class AfterImport(importlib.abc.MetaPathFinder):
    """Calls ``callback(module)`` once ``name`` has been imported, then steps aside.

    It finds nothing itself: it asks the other finders for the module's spec and wraps
    that loader's ``exec_module`` (a per-module loader instance), so what the module sees
    (its ``__spec__``, ``__loader__``) is unchanged."""

    def __init__(self, name: str, callback: Callable[[ModuleType], None]) -> None:
        self.name = name
        self.callback = callback

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != self.name:
            return None
        if self in sys.meta_path:
            sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)
        loader = spec.loader if spec is not None else None
        original = getattr(loader, "exec_module", None)
        if spec is None or loader is None or original is None:
            return spec
        callback = self.callback

        def exec_module(module: ModuleType) -> None:
            original(module)
            with contextlib.suppress(Exception):  # never let ShapeLens break an import
                callback(module)

        with contextlib.suppress(AttributeError, TypeError):
            loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def when_imported(name: str, callback: Callable[[ModuleType], None]) -> None:
    """``callback(module)`` now if ``name`` is loaded, else right after it is imported."""
    module = sys.modules.get(name)
    if module is None:
        sys.meta_path.insert(0, AfterImport(name, callback))
        return
    with contextlib.suppress(Exception):  # the warm runner imported it before us
        callback(module)
