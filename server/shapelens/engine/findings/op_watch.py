"""Operand values of a statement's elementwise torch ops, seen as they run.

A broadcast hides in ``fc(x) - y.squeeze(1)`` as often as in ``y - pred``, and the
operands of the former are values no name holds. On a statement's checked hits (1, 2, 4,
…) the tracer watches it: a ``TorchFunctionMode`` is pushed while the statement runs, sees
each elementwise op called directly from the statement's frame, with its real operands and
result, and hands them to the broadcast rule. Between checked hits nothing is pushed, so
the cost stays bounded by lines × log(iterations).
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable
from types import FrameType
from typing import Any

from shapelens.engine import torch_compat
from shapelens.engine.findings.elementwise import OPERATOR_NAMES

# torch function name → (operator as written, operands reversed)
_OPS: dict[str, tuple[str, bool]] = {}
for _symbol, _names in OPERATOR_NAMES.items():
    for _name in _names:
        _OPS[_name] = (_symbol, False)
        _OPS[f"__{_name}__"] = (_symbol, False)
        _OPS[f"__r{_name}__"] = (_symbol, True)
_OPS["__truediv__"] = ("/", False)
_OPS["__rtruediv__"] = ("/", True)

OnOp = Callable[[FrameType, str, Any, Any, Any], None]
"""(frame, operator, left value, right value, result)"""


class OpWatch:
    """Watches frames of user code while their current statement runs."""

    def __init__(self, on_op: OnOp) -> None:
        self.on_op = on_op
        self.enabled = True
        """Off when the program's torch.compile regions really compile (``--compile``):
        dynamo would trace a mode active around a compiled call and break its graph."""
        self.base_depth = 0
        """Modes of ours under it for the whole run (a shape-only run's): not the user's."""
        self._frames: dict[int, FrameType] = {}
        self._mode: Any = None
        self._torch_dir = ""

    def begin(self, frame: FrameType) -> bool:
        """Watch ``frame``'s statement until :meth:`end`; False when torch cannot be watched
        now (not imported, compiling, or another mode is active)."""
        torch = sys.modules.get("torch")
        if not self.enabled or torch is None or not hasattr(torch, "overrides"):
            return False
        compiler = getattr(torch, "compiler", None)
        if compiler is not None and compiler.is_compiling():
            return False
        if self._mode is None:
            self._mode = _make_mode(torch, self)
            self._torch_dir = os.path.dirname(str(torch.__file__))
        if not self._frames:
            if torch_compat.function_mode_depth(torch) != self.base_depth:
                return False  # the user's own mode is active: never reorder their stack
            torch_compat.push_function_mode(torch, self._mode)
        self._frames[id(frame)] = frame
        return True

    def end(self, frame: FrameType) -> None:
        if self._frames.pop(id(frame), None) is None or self._frames:
            return
        torch = sys.modules["torch"]
        if torch_compat.top_function_mode(torch) is self._mode:
            torch_compat.pop_function_mode(torch)
        else:
            self._frames[id(frame)] = frame  # a user mode sits on ours: end when it is gone

    def watching(self) -> bool:
        return bool(self._frames)

    def seen(self, func: Any, args: tuple[Any, ...], result: Any, caller: FrameType | None) -> None:
        spec = _OPS.get(getattr(func, "__name__", ""))
        if spec is None or len(args) < 2:
            return
        frame = caller
        for _ in range(4):  # torch's own Python wrappers (Tensor.__rsub__) sit in between
            if frame is None:
                return
            if self._frames.get(id(frame)) is frame:
                symbol, reversed_ = spec
                left, right = (args[1], args[0]) if reversed_ else (args[0], args[1])
                self.on_op(frame, symbol, left, right, result)
                return
            if not frame.f_code.co_filename.startswith(self._torch_dir):
                return
            frame = frame.f_back


def _make_mode(torch: Any, watch: OpWatch) -> Any:
    class _WatchMode(torch.overrides.TorchFunctionMode):  # type: ignore[misc]
        def __torch_function__(
            self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None
        ) -> Any:
            result = func(*args, **(kwargs or {}))
            with contextlib.suppress(Exception):  # never an error in the user's program
                watch.seen(func, args, result, sys._getframe(1))
            return result

    return _WatchMode()
