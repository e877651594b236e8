"""A torch function mode that hands every call to one function: what a replay runs under
(:mod:`.replay`, :mod:`.nonfinite_origin`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

OnCall = Callable[[Any, tuple[Any, ...], dict[str, Any]], Any]
"""``(func, args, kwargs) -> result``: makes the call (or not) and returns its result."""

_CLASSES: dict[int, type] = {}


def call_mode(torch: Any, on_call: OnCall) -> Any:
    """A mode to enter (``with``): each torch call its block makes goes to ``on_call``, which
    runs with the mode off (torch's own calls inside it are not seen)."""
    found = _CLASSES.get(id(torch))
    if found is None:

        class _CallMode(torch.overrides.TorchFunctionMode):  # type: ignore[misc]
            def __init__(self, handler: OnCall) -> None:
                super().__init__()
                self.handler = handler

            def __torch_function__(
                self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None
            ) -> Any:
                return self.handler(func, args, kwargs or {})

        found = _CLASSES[id(torch)] = _CallMode
    return found(on_call)
