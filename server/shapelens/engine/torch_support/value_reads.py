"""A shape-only run's answers to the program's value reads, and where it gave them.

``.item()``, ``float()``, ``int()``, ``bool()`` (an ``if`` or ``while`` on a tensor),
``.tolist()``, ``.numpy()``, formatting and printing a fake tensor get stand-ins
(:mod:`~shapelens.engine.torch_support.simulated_values` says which), and each is counted at
the line of user code that read it: the trace's ``shape_only.simulated``, the hints' marks,
the summary's count. The methods are replaced on torch's ``FakeTensor`` class alone, so a
real tensor (a batch's random positions) and every other op cost nothing more.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from shapelens.engine.recording.values import device_name
from shapelens.engine.torch_support import simulated_values, torch_compat
from shapelens.engine.torch_support.simulated_values import (
    FLOAT_STAND_IN,
    INT_STAND_IN,
    WHILE_BOUND,
    SimulatedFloat,
    SimulatedInt,
    TensorMarks,
)
from shapelens.trace.messages import SimulatedRecord

Where = Callable[[], "tuple[str, int] | None"]
NOT_SIMULATED = object()
"""What :meth:`ValueReads.run_reading` returns for an op it has no stand-in for."""

_NAN_TESTS = ("isnan", "isinf", "isposinf", "isneginf")
"""What asks whether a value is NaN or Inf: False on simulated values (they are finite)."""
_KEEPING_FALSE = ("any", "all", "sum", "amax", "logical_or", "logical_and", "__or__", "__and__",
                  "__ror__", "__rand__", "bitwise_or", "bitwise_and", "clone", "to", "cpu",
                  "detach")  # fmt: skip
"""What keeps a NaN test's answer (``torch.isnan(x).any()``)."""
_SAME_AS_ITSELF = ("ne", "__ne__")
"""``x != x``: the NaN test written by hand."""


def nan_test_functions(torch: Any) -> frozenset[Any]:
    """The torch functions :meth:`ValueReads.after_call` must see (the module's and the
    tensor method of each name): every other op goes by without a look."""
    names = (*_NAN_TESTS, *_KEEPING_FALSE, *_SAME_AS_ITSELF)
    found = {getattr(owner, name, None) for owner in (torch, torch.Tensor) for name in names}
    found.discard(None)
    return frozenset(found)


class ValueReads:
    """Stand-ins for a fake tensor's values, counted per line of user code."""

    def __init__(self, where: Where, line_text: Callable[[str, int], str]) -> None:
        self._where = where
        self._line_text = line_text
        self.lines: dict[tuple[str, int], list[int]] = {}
        """(file, line) → [values read, decisions taken] on simulated values."""
        self.changed = False
        self._nan_free = TensorMarks()
        """Tensors that answer False: a NaN/Inf test of simulated (finite) values."""
        self._in_a_row: dict[tuple[str, int], int] = {}
        self._torch: Any = None
        self._comparisons: tuple[Any, ...] = ()
        self._indexing: tuple[Any, ...] = ()
        self.nan_tests: frozenset[Any] = frozenset()

    # -- the ledger ---------------------------------------------------------------------
    def note(self, *, decided: bool) -> tuple[str, int] | None:
        where = self._where()
        if where is None:
            return None
        counts = self.lines.get(where)
        if counts is None:
            counts = self.lines[where] = [0, 0]
        counts[1 if decided else 0] += 1
        self.changed = True
        return where

    def entries(self) -> list[SimulatedRecord]:
        return [
            SimulatedRecord(file, line, values, decisions)
            for (file, line), (values, decisions) in self.lines.items()
        ]

    # -- the stand-ins ------------------------------------------------------------------
    def install_on_shards(self, sharded_type: type, patch: Callable[[Any, str, Any], None]) -> None:
        """A sharded tensor's (DTensor's) value reads read its own fake shard (whose reads
        have stand-ins): reading the whole would be a collective on fake data."""
        for name in READ_METHODS:
            patch(sharded_type, name, _on_the_shard(name))

    def install(self, torch: Any, fake_type: type, patch: Callable[[Any, str, Any], None]) -> None:
        """Replace ``fake_type``'s value reads (``patch(owner, name, replacement)`` puts each
        back later); decisions on simulated Python numbers are counted too."""
        self._torch = torch
        self.nan_tests = nan_test_functions(torch)
        self._comparisons = (torch.allclose, torch.equal, torch.Tensor.allclose, torch.Tensor.equal)
        self._indexing = (torch.Tensor.__getitem__, torch.Tensor.__setitem__)
        for name, replacement in (  # READ_METHODS
            ("item", self._item),
            ("__bool__", self._as_bool),
            ("__float__", self._as_float),
            ("__int__", self._as_int),
            ("__index__", self._as_index),
            ("__format__", self._formatted),
            ("tolist", self._tolist),
            ("numpy", self._numpy),
        ):
            patch(fake_type, name, _unless_known(getattr(fake_type, name), replacement))
        printed = self._printed
        patch(fake_type, "__repr__", lambda tensor, *args, **kwargs: printed(tensor))
        simulated_values.decided.append(self._decided)

    def _stand_in(self, tensor: Any) -> Any:
        dtype = tensor.dtype
        if dtype.is_floating_point or dtype.is_complex:
            return SimulatedFloat(FLOAT_STAND_IN)
        if dtype == self._torch.bool:
            return self._nan_free.get(tensor) is None
        return SimulatedInt(INT_STAND_IN)

    def _item(self, tensor: Any) -> Any:
        self.note(decided=False)
        return self._stand_in(tensor)

    def _as_bool(self, tensor: Any) -> bool:
        answer = bool(self._stand_in(tensor))
        where = self.note(decided=True)
        if answer and where is not None:
            answer = self._loops_on(where)
        return answer

    def _as_float(self, tensor: Any) -> float:
        self.note(decided=False)
        return SimulatedFloat(float(self._stand_in(tensor)))

    def _as_int(self, tensor: Any) -> int:
        self.note(decided=False)
        return SimulatedInt(int(self._stand_in(tensor)))

    def _as_index(self, tensor: Any) -> int:
        self.note(decided=False)
        return int(self._stand_in(tensor))  # __index__ must return a plain int

    def _formatted(self, tensor: Any, spec: str) -> str:
        if tensor.dim() == 0:
            self.note(decided=False)
            return format(self._stand_in(tensor), spec)
        return format(self._printed(tensor), spec)

    def _tolist(self, tensor: Any) -> Any:
        self.note(decided=False)
        return _filled(tuple(int(size) for size in tensor.shape), self._stand_in(tensor))

    def _numpy(self, tensor: Any, *, force: bool = False) -> Any:
        """As torch's ``.numpy()``: refused for a tensor that requires grad or is not on the
        CPU (a simulated GPU's too), else an array of stand-ins."""
        if tensor.requires_grad and not force:
            raise RuntimeError(
                "Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() "
                "instead."
            )
        device = shown_device(tensor)
        if device != "cpu" and not force:
            raise TypeError(
                f"can't convert {device} device type tensor to numpy. Use Tensor.cpu() to "
                "copy the tensor to host memory first."
            )
        self.note(decided=False)
        torch = self._torch
        with torch_compat.unset_fake_temporarily():
            return torch.full(
                tuple(tensor.shape), self._stand_in(tensor), dtype=tensor.dtype
            ).numpy()

    def _printed(self, tensor: Any) -> str:
        """As torch prints a tensor without data (a meta tensor): ``tensor(..., size=(4, 3))``."""
        self.note(decided=False)
        device = shown_device(tensor)  # torch leaves the CPU unsaid
        parts = [f"size={tuple(tensor.shape)}"]
        if device != "cpu":
            parts.insert(0, f"device='{device}'")
        torch = self._torch
        if tensor.dtype not in (torch.float32, torch.int64, torch.bool):
            parts.append(f"dtype={tensor.dtype}")
        if tensor.grad_fn is not None:
            parts.append(f"grad_fn=<{type(tensor.grad_fn).__name__}>")
        elif tensor.requires_grad:
            parts.append("requires_grad=True")
        return f"tensor(..., {', '.join(parts)})"

    def remove(self) -> None:
        if self._decided in simulated_values.decided:
            simulated_values.decided.remove(self._decided)
        self._nan_free.clear()

    def _decided(self) -> None:
        self.note(decided=True)

    def _loops_on(self, where: tuple[str, int]) -> bool:
        """True, unless ``where`` is a ``while`` that has looped :data:`WHILE_BOUND` times in
        a row on simulated values: then False, once."""
        if not self._line_text(*where).lstrip().startswith("while"):
            return True
        passes = self._in_a_row.get(where, 0) + 1
        if passes > WHILE_BOUND:
            self._in_a_row[where] = 0
            return False
        self._in_a_row[where] = passes
        return True

    # -- ops that read a value inside torch -------------------------------------------
    def run_reading(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """``func``'s result where its kernel needed a fake tensor's value, with stand-ins:
        ``allclose``/``equal`` are True (``assert torch.allclose(a, b)`` holds), an index
        that is a 0-dim integer tensor (``x[scores.argmax()]``) is 0, a position every
        dim has. :data:`NOT_SIMULATED` where there is none."""
        torch = self._torch
        if func in self._comparisons:
            self.note(decided=True)
            return True
        if func in self._indexing and len(args) > 1:
            index = _zero_for_0_dim(torch, args[1])
            if index is not args[1]:
                self.note(decided=False)
                return func(args[0], index, *args[2:], **kwargs)
        return NOT_SIMULATED

    # -- NaN tests ----------------------------------------------------------------------
    def after_call(self, func: Any, args: tuple[Any, ...], result: Any) -> None:
        """A NaN/Inf test's result answers False (and what reduces it keeps that): called
        for the functions of :attr:`nan_tests` only."""
        name = getattr(func, "__name__", "")
        if (
            name in _NAN_TESTS
            or (name in _SAME_AS_ITSELF and len(args) > 1 and args[0] is args[1])
            or (
                self._nan_free
                and name in _KEEPING_FALSE
                and any(self._nan_free.get(a) for a in args)
            )
        ):
            self._nan_free.mark(result, True)


def _unless_known(original: Any, replacement: Callable[..., Any]) -> Callable[..., Any]:
    """``replacement``, unless the fake tensor knows its value: a constant (an optimizer's
    step counter, ``torch.tensor(0.0)``), which torch reads as it is."""

    def read(self: Any, *args: Any, **kwargs: Any) -> Any:
        if getattr(self, "constant", None) is not None:
            return original(self, *args, **kwargs)
        return replacement(self, *args, **kwargs)

    read.__name__ = replacement.__name__
    return read


def shown_device(tensor: Any) -> str:
    """The device as the program sees it (``meta`` on simulated CUDA: ``cuda:0``)."""
    return device_name(tensor.device) or "cpu"


def _zero_for_0_dim(torch: Any, index: Any) -> Any:
    """``index`` with each 0-dim integer tensor in it as 0 (itself when it has none)."""
    if isinstance(index, tuple):
        parts = tuple(_zero_for_0_dim(torch, part) for part in index)
        return index if all(a is b for a, b in zip(parts, index, strict=True)) else parts
    if (
        isinstance(index, torch.Tensor)
        and index.dim() == 0
        and not index.is_floating_point()
        and index.dtype != torch.bool
    ):
        return 0
    return index


def _filled(shape: tuple[int, ...], value: Any) -> Any:
    """``.tolist()`` of a tensor of ``shape`` whose every value is ``value``."""
    if not shape:
        return value
    return [_filled(shape[1:], value) for _ in range(shape[0])]


READ_METHODS = (
    "item", "__bool__", "__float__", "__int__", "__index__", "__format__", "tolist", "numpy",
)  # fmt: skip
"""A tensor's methods that read its values (each gets a stand-in on a fake tensor)."""


def _on_the_shard(name: str) -> Callable[..., Any]:
    def read_the_shard(tensor: Any, *args: Any, **kwargs: Any) -> Any:
        shard = torch_compat.local_shard(tensor)
        return getattr(shard, name)(*args, **kwargs)

    return read_the_shard
