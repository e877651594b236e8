"""``torch.compile`` under the tracer.

Two problems, two remedies, both applied the moment torch is imported (at once when it is
already loaded, else by a one-shot import hook), so a run that never imports torch pays
nothing:

* Dynamo's frame-evaluation hook sees every Python frame the thread evaluates, including
  ShapeLens's callbacks run from inside a compiled region (trace functions on 3.11, a
  torch function mode, a warnings hook): it would trace and compile them, warn about them
  in the user's output and break graphs on them. Every code object of the engine is
  marked "skip, and skip what it calls" for dynamo: a C-level flag that costs nothing per
  call (``torch._dynamo.disable`` would wrap each callback in Python).
* Lines of a compiled function run as compiled code, which has no lines to report. By
  default the program's own ``torch.compile`` calls get ``disable=True`` (torch's own
  documented no-op: the function or module comes back unchanged and runs eagerly, with
  hints); with ``keep`` they compile as usual. Calls made inside torch itself (for example
  flex_attention's) are left alone.

Which of the two happened is recorded as the run's compile mode.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from types import CodeType, FrameType, FunctionType, ModuleType
from typing import Any, Literal

from shapelens.engine import ENGINE_PACKAGE
from shapelens.engine.recording.run_records import RunRecords
from shapelens.engine.recording.scope import UserCodeScope
from shapelens.engine.torch_support import torch_compat
from shapelens.engine.torch_support.after_import import AfterImport

CompileMode = Literal["eager", "compiled"]

# torch's own forwarders of a user's call: ``@torch.compile(mode=...)`` returns ``fn``,
# which calls torch.compile again; ``Module.compile()`` calls it on ``_call_impl``.
_FORWARDERS = frozenset({"fn", "compile"})


def nested_codes(functions: Iterable[Callable[..., Any]]) -> list[CodeType]:
    """The code objects of ``functions`` and of everything defined inside them (closures
    such as local trace functions, classes such as a TorchFunctionMode)."""
    found: list[CodeType] = []
    pending = [f.__code__ for f in functions]
    while pending:
        code = pending.pop()
        found.append(code)
        pending.extend(c for c in code.co_consts if isinstance(c, CodeType))
    return found


def engine_functions() -> list[Callable[..., Any]]:
    """Every function and method defined in the loaded modules of this package: the engine
    runs only from the interpreter's callbacks (trace functions, sys.monitoring, a torch
    function mode, a warnings hook), never the user's code, so all of it stays with them."""
    package = ENGINE_PACKAGE
    found: list[Callable[..., Any]] = []
    for name, module in list(sys.modules.items()):
        if module is None or not (name == package or name.startswith(package + ".")):
            continue
        for value in list(vars(module).values()):
            if getattr(value, "__module__", None) != name:
                continue
            members = list(vars(value).values()) if isinstance(value, type) else [value]
            for member in members:
                for function in (
                    getattr(member, "__func__", member),  # staticmethod, classmethod
                    getattr(member, "fget", None),  # property
                    getattr(member, "fset", None),
                ):
                    if isinstance(function, FunctionType):
                        found.append(function)
    return found


class CompileControl:
    """Installs both remedies and records the compile mode; :meth:`uninstall` puts torch's
    own ``torch.compile`` back (a notebook cell's engine ends, the kernel goes on)."""

    def __init__(
        self,
        *,
        scope: UserCodeScope,
        records: RunRecords,
        keep: bool,
        callbacks: Sequence[Callable[..., Any]] = (),
    ) -> None:
        self.scope = scope
        self.records = records
        self.keep = keep
        self.callbacks = list(callbacks)
        """Callbacks outside the engine (the runner's, the log's), kept out of dynamo too."""
        self._hook: AfterImport | None = None
        self._wrapped: tuple[ModuleType, Callable[..., Any]] | None = None
        """torch, and the ``torch.compile`` our wrap replaced (put back by uninstall)."""

    def install(self) -> None:
        torch = sys.modules.get("torch")
        if torch is not None and hasattr(torch, "compile"):
            with contextlib.suppress(Exception):  # the warm runner imported it before us
                self._on_torch(torch)
        else:
            self._hook = AfterImport("torch", self._on_torch)
            sys.meta_path.insert(0, self._hook)

    def uninstall(self) -> None:
        """``torch.compile`` as it was before :meth:`install` (a later wrap is left alone)."""
        if self._hook is not None and self._hook in sys.meta_path:
            sys.meta_path.remove(self._hook)
        if self._wrapped is not None:
            torch, original = self._wrapped
            if getattr(getattr(torch, "compile", None), "__shapelens__", None) is self:
                setattr(torch, "compile", original)  # noqa: B010
        self._wrapped = None

    def _on_torch(self, torch: ModuleType) -> None:
        self._keep_out_of_dynamo(torch)
        original = getattr(torch, "compile", None)
        if callable(original) and getattr(original, "__shapelens__", None) is None:
            torch_dir = os.path.dirname(torch.__file__ or "")
            self._wrapped = (torch, original)
            setattr(torch, "compile", self._wrap(original, torch_dir))  # noqa: B010

    def _keep_out_of_dynamo(self, torch: ModuleType) -> None:
        # On a torch without the flag, the non-finite scan still stands aside while compiling.
        torch_compat.skip_in_dynamo(torch, nested_codes([*engine_functions(), *self.callbacks]))

    def _wrap(self, original: Callable[..., Any], torch_dir: str) -> Callable[..., Any]:
        @functools.wraps(original)
        def patched(*args: Any, **kwargs: Any) -> Any:
            model = args[0] if args else kwargs.get("model")
            if (
                model is not None
                and not kwargs.get("disable")
                and self._called_by_user(sys._getframe(1), torch_dir)
            ):
                if not self.keep:
                    kwargs["disable"] = True
                self.records.compile_mode = "compiled" if self.keep else "eager"
            return original(*args, **kwargs)

        patched.__shapelens__ = self  # type: ignore[attr-defined]
        return patched

    def _called_by_user(self, frame: FrameType | None, torch_dir: str) -> bool:
        torch_prefix = os.path.join(torch_dir, "")
        while (
            frame is not None
            and frame.f_code.co_name in _FORWARDERS
            and frame.f_code.co_filename.startswith(torch_prefix)
        ):
            frame = frame.f_back
        return frame is not None and self.scope.user_file(frame.f_code.co_filename) is not None
