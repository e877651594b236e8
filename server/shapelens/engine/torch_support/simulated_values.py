"""The values a shape-only run stands in for the data it does not have.

A fake tensor has no values, yet scripts read them: ``loss.item()`` in a log line, an
accuracy from ``(pred == y).float().mean().item()``, ``if val_loss < best:``. A shape-only
run answers each read with a stand-in chosen so that an ordinary script takes its ordinary
path (the rule is in docs/cli.md, "What a shape-only run simulates"):

- a float is 0.5: a loss is finite, an accuracy is a fraction, a plateau is reached only after
  the first epoch (``0.5 < best`` holds once, from ``inf``);
- an int is 1: a count divides, a ``range`` of it runs once;
- a bool is True (a comparison, ``all()``, ``isfinite()``), except where it asks whether a
  value is NaN or Inf (``isnan``, ``isinf``, ``x != x`` and what reduces them): False;
- a ``while`` on a tensor loops at most :data:`WHILE_BOUND` times in a row.

The Python numbers handed out are :class:`SimulatedFloat` and :class:`SimulatedInt`: their
arithmetic keeps the mark (Python tries a subclass's reflected operator first, so ``total +=
loss.item()`` is simulated too), the recorder names their type ``simulated float``, and a
comparison of one is a decision taken on a simulated value.
"""

from __future__ import annotations

import os
import sys
import weakref
from collections.abc import Callable
from typing import Any

from shapelens.trace.messages import SIMULATED_PREFIX

FLOAT_STAND_IN = 0.5
INT_STAND_IN = 1
WHILE_BOUND = 16
"""A ``while`` whose test reads a simulated value ends after this many passes in a row."""

TYPE_NAMES: dict[type, str] = {}
"""The recorder's names of the simulated number types (``simulated float``)."""

decided: list[Callable[[], None]] = []
"""Told when the program compares a simulated number (a shape-only run listens while it
runs); ShapeLens's own comparisons (the recorder's min and max) are not the program's."""
_OURS = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))) + os.sep


def _note_decision() -> None:
    if decided and not sys._getframe(2).f_code.co_filename.startswith(_OURS):
        for listener in decided:
            listener()


_ARITHMETIC = (
    "add", "sub", "mul", "truediv", "floordiv", "mod", "pow",
    "radd", "rsub", "rmul", "rtruediv", "rfloordiv", "rmod", "rpow",
)  # fmt: skip
_UNARY = ("neg", "pos", "abs")
_COMPARISONS = ("lt", "le", "gt", "ge", "eq", "ne")


def _marked(result: Any) -> Any:
    """A result of simulated arithmetic, marked in turn (bools cannot be: a comparison's
    result is plain, and noted as a decision instead)."""
    tp = type(result)
    if tp is float:
        return SimulatedFloat(result)
    if tp is int:
        return SimulatedInt(result)
    return result


def _keeping_the_mark(base: type, name: str) -> Callable[..., Any]:
    op = getattr(base, f"__{name}__")

    def method(self: Any, *args: Any) -> Any:
        return _marked(op(self, *args))

    method.__name__ = f"__{name}__"
    return method


def _deciding(base: type, name: str) -> Callable[..., Any]:
    op = getattr(base, f"__{name}__")

    def method(self: Any, other: Any) -> Any:
        result = op(self, other)
        if result is not NotImplemented:
            _note_decision()
        return result

    method.__name__ = f"__{name}__"
    return method


def _simulated(base: type) -> type:
    namespace: dict[str, Any] = {
        f"__{name}__": _keeping_the_mark(base, name) for name in (*_ARITHMETIC, *_UNARY)
    }
    namespace |= {f"__{name}__": _deciding(base, name) for name in _COMPARISONS}
    namespace["__hash__"] = base.__hash__
    namespace["__slots__"] = ()
    namespace["__doc__"] = (
        f"A {base.__name__} a shape-only run stood in for a tensor's value (it has none)."
    )
    namespace["__module__"] = __name__
    cls = type(f"Simulated{base.__name__.capitalize()}", (base,), namespace)
    TYPE_NAMES[cls] = SIMULATED_PREFIX + base.__name__
    return cls


SimulatedFloat: type[float] = _simulated(float)
SimulatedInt: type[int] = _simulated(int)

CONVERSION_WARNINGS = (
    r".*__float__ returned non-float \(type SimulatedFloat\)",  # "FakeTensor.__float__ ..."
    r".*__int__ returned non-int \(type SimulatedInt\)",
)
"""Python's deprecation warnings where ``float(t)``/``int(t)`` return a stand-in (a subclass,
so it keeps its mark): ShapeLens's doing, never shown as the program's."""


# -- marks on tensors -------------------------------------------------------------------
class TensorMarks:
    """Something known of some tensors, by identity (a tensor's ``==`` is elementwise, and a
    fake one's would run torch): kept while the tensor lives."""

    def __init__(self) -> None:
        self._marks: dict[int, tuple[Any, Any]] = {}

    def __bool__(self) -> bool:
        return bool(self._marks)

    def mark(self, tensor: Any, data: Any) -> None:
        key = id(tensor)
        marks = self._marks

        def forget(ref: Any) -> None:
            entry = marks.get(key)
            if entry is not None and entry[0] is ref:
                del marks[key]

        marks[key] = (weakref.ref(tensor, forget), data)

    def get(self, tensor: Any) -> Any:
        """What was marked on ``tensor`` (None: nothing)."""
        entry = self._marks.get(id(tensor))
        if entry is None or entry[0]() is not tensor:
            return None
        return entry[1]

    def clear(self) -> None:
        self._marks.clear()


bounded = TensorMarks()
"""Tensors whose size depends on values a shape-only run does not have (a boolean mask's
selection, ``nonzero``): the dims whose size is only an upper bound. Empty outside such runs:
a reader checks it before anything else."""


def bounded_dims(tensor: Any) -> tuple[int, ...]:
    """The dims of ``tensor`` whose size is an upper bound (none: ``()``)."""
    return bounded.get(tensor) or () if bounded else ()
