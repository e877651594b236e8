"""``snoop``: torchsnooper's API and log format on pysnooper's Tracer, with ShapeLens's
metadata formatting, and an optional feed into the structured trace."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any

import pysnooper
import pysnooper.utils

from shapelens.snooping.formats import (
    NumpyFormat,
    TensorFormat,
    default_format,
    default_numpy_format,
    format_value,
)
from shapelens.snooping.recording import recording


class ShapeLensSnooper(pysnooper.tracer.Tracer):  # type: ignore[misc]
    """``@snoop()`` / ``with snoop():`` — drop-in for ``torchsnooper.snoop``."""

    def __init__(
        self,
        *args: Any,
        tensor_format: Callable[[Any], str] = default_format,
        numpy_format: Callable[[Any], str] = default_numpy_format,
        **kwargs: Any,
    ) -> None:
        self.orig_custom_repr = kwargs.get("custom_repr", ())
        # Every value goes through compute_repr (as in torchsnooper): user custom_repr first.
        kwargs["custom_repr"] = ((lambda _: True, self.compute_repr),)
        super().__init__(*args, **kwargs)
        self.tensor_format = tensor_format
        self.numpy_format = numpy_format
        self.recording = recording()

    def compute_repr(self, value: Any) -> str:
        custom = pysnooper.utils.get_repr_function(value, self.orig_custom_repr)
        fallback: Callable[[Any], str] = custom if custom is not repr else repr
        return format_value(value, self.tensor_format, self.numpy_format, fallback)

    def trace(self, frame: FrameType, event: str, arg: Any) -> Any:
        result = super().trace(frame, event, arg)
        if result is not None and self.recording is not None:
            self.recording.event(frame, event, arg)
        return result


snoop = ShapeLensSnooper

__all__ = ["NumpyFormat", "ShapeLensSnooper", "TensorFormat", "WholeRunSnooper", "snoop"]


class WholeRunSnooper(ShapeLensSnooper):
    """``shapelens run --log``: the TorchSnooper log of every user-code frame of a run."""

    def __init__(self, is_user_code: Callable[[Any], bool], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._is_user_code = is_user_code

    def trace(self, frame: FrameType, event: str, arg: Any) -> Any:
        code = frame.f_code
        if event == "call" and code not in self.target_codes and self._is_user_code(code):
            self.target_codes.add(code)
        return super().trace(frame, event, arg)

    def install(self) -> None:
        """Trace from here on, without a ``with`` block (whose frame would be logged too).

        Only ever called in the traced child process, which is ours: module frames there
        would otherwise log ``__builtins__`` and friends on their first line."""
        pysnooper.tracer.get_local_reprs = _without_module_dunders(pysnooper.tracer.get_local_reprs)
        pysnooper.tracer.thread_global.__dict__.setdefault("depth", -1)
        sys.settrace(self.trace)
        threading.settrace(self.trace)


def _without_module_dunders(original: Callable[..., Any]) -> Callable[..., Any]:
    def get_local_reprs(frame: FrameType, *args: Any, **kwargs: Any) -> Any:
        reprs = original(frame, *args, **kwargs)
        if frame.f_code.co_name == "<module>":
            for name in [n for n in reprs if n.startswith("__") and n.endswith("__")]:
                del reprs[name]
        return reprs

    return get_local_reprs
