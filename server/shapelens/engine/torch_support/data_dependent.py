"""Ops whose result's size depends on the data, run in a shape-only run at their bound.

Boolean-mask indexing (``x[mask]``), ``nonzero``/``argwhere``, ``torch.where(cond)``,
``masked_select``, ``unique`` and ``unique_consecutive`` return as many rows as there are
selected (or distinct) values, ``pack_padded_sequence`` as many as the lengths add up to: a
fake tensor cannot know how many. The run goes on with the most there can be (every element
selected, every value distinct, every sequence as long as the longest; ``bincount`` with its
``minlength`` bins), marks those dims as bounds
(:data:`~shapelens.engine.torch_support.simulated_values.bounded`: hints write ``(≤32,8)``),
and counts memory at the bound. Only called when the fake kernel has refused the op, so no
other op pays for it.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

from shapelens.engine.torch_support import torch_compat
from shapelens.engine.torch_support.simulated_values import bounded

Bound = Callable[[tuple[Any, ...], dict[str, Any]], Any]


class AtTheBound:
    """Runs the ops the fake kernel refused at their bound, and keeps the mark on what is
    computed from their results."""

    def __init__(self, torch: Any, tree_leaves: Callable[[Any], list[Any]]) -> None:
        self._torch = torch
        self._tree_leaves = tree_leaves
        self._bounds = bounds(torch)

    def run(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """``func``'s result at its bound (None: not an op run so here)."""
        bound = self._bounds.get(func)
        return None if bound is None else bound(args, kwargs)

    def after_call(self, args: tuple[Any, ...], kwargs: dict[str, Any], result: Any) -> None:
        """A result of a tensor whose size is a bound: its dims of the bounded sizes are
        bounds too (``h = x[mask]; z = h @ w``: ``z``'s rows are as unknown as ``h``'s).
        Nothing to do (one truth test) while no such tensor lives."""
        if not bounded:
            return
        tensor_type = self._torch.Tensor
        sizes = set()
        for leaf in self._tree_leaves((args, kwargs)):
            if isinstance(leaf, tensor_type):
                for dim in bounded.get(leaf) or ():
                    sizes.add(leaf.shape[dim])
        if not sizes:
            return
        for leaf in self._tree_leaves(result):
            if isinstance(leaf, tensor_type) and bounded.get(leaf) is None:
                dims = tuple(d for d, size in enumerate(leaf.shape) if size in sizes)
                if dims:
                    bounded.mark(leaf, dims)


def bounds(torch: Any) -> dict[Any, Bound]:
    """The op → its result at the bound, for each op that has one here."""
    Tensor = torch.Tensor
    ops: list[tuple[Callable[..., Any], tuple[Any, ...]]] = [
        (_nonzero, (torch.nonzero, Tensor.nonzero, torch.argwhere, Tensor.argwhere)),
        (_where, (torch.where,)),
        (_masked_select, (torch.masked_select, Tensor.masked_select)),
        (
            _unique,
            (torch.unique, Tensor.unique, torch.unique_consecutive, Tensor.unique_consecutive),
        ),
        (_getitem, (Tensor.__getitem__,)),
        (_bincount, (torch.bincount, Tensor.bincount)),
        (_pack_padded, (torch_compat.pack_padded_sequence_op(torch),)),
    ]
    return {
        func: functools.partial(bound, torch)
        for bound, funcs in ops
        for func in funcs
        if func is not None
    }


def _nonzero(torch: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    source = args[0]
    if kwargs.get("as_tuple"):
        return _as_tuple(torch, source)
    found = torch.zeros(
        (max(source.numel(), 0), source.dim()), dtype=torch.long, device=source.device
    )
    return _marked(found, (0,))


def _where(torch: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    if len(args) + len(kwargs) != 1:
        return None  # where(cond, x, y): a fixed size, not ours
    return _as_tuple(torch, args[0] if args else kwargs["condition"])


def _masked_select(torch: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    source, mask = (*args, *kwargs.values())[:2]
    size = math.prod(torch.broadcast_shapes(source.shape, mask.shape))
    return _marked(source.new_empty((size,)), (0,))


def _unique(torch: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    source = args[0]
    dim = kwargs.get("dim")
    if dim is None:
        values = _marked(source.new_empty((source.numel(),)), (0,))
        rows = source.numel()
    else:
        dim = dim % max(source.dim(), 1)
        values = _marked(source.new_empty(source.shape), (dim,))
        rows = source.shape[dim]
    out = [values]
    if kwargs.get("return_inverse"):
        inverse_shape = source.shape if dim is None else (source.shape[dim],)
        out.append(torch.zeros(inverse_shape, dtype=torch.long, device=source.device))
    if kwargs.get("return_counts"):
        counts = torch.zeros((rows,), dtype=torch.long, device=source.device)
        out.append(_marked(counts, (0,)))
    return out[0] if len(out) == 1 else tuple(out)


def _getitem(torch: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    source, index = args[0], args[1]
    items = index if isinstance(index, tuple) else (index,)
    masks = [i for i, item in enumerate(items) if _is_mask(torch, item)]
    if len(masks) != 1:
        return None
    at = masks[0]
    mask = items[at]
    positions = _as_tuple(torch, mask)  # one long index per dim the mask covers
    replaced = (*items[:at], *positions, *items[at + 1 :])
    result = torch.Tensor.__getitem__(source, replaced)
    return _marked(result, (_dims_before(items[:at], source.dim(), items),))


def _pack_padded(torch: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Every sequence at the longest length: ``(B·T, ...)`` data, ``T`` batch sizes of
    ``B`` (real numbers: the LSTM reads them as sizes)."""
    source, _lengths, batch_first = (*args, *kwargs.values())[:3]
    rows, steps = (0, 1) if batch_first else (1, 0)
    batch, length = source.shape[rows], source.shape[steps]
    if not batch_first:
        source = source.transpose(0, 1)
    data = _marked(source.reshape(batch * length, *source.shape[2:]), (0,))
    with torch_compat.unset_fake_temporarily():
        sizes = torch.full((length,), batch, dtype=torch.long)
    return data, sizes


def _bincount(torch: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``minlength`` bins (the classes a program counts): with none, no stand-in."""
    source = args[0]
    weights = args[1] if len(args) > 1 else kwargs.get("weights")
    minlength = args[2] if len(args) > 2 else kwargs.get("minlength", 0)
    if not minlength:
        return None
    dtype = torch.long if weights is None else weights.dtype
    return torch.zeros((int(minlength),), dtype=dtype, device=source.device)


def _as_tuple(torch: Any, source: Any) -> tuple[Any, ...]:
    """``nonzero(as_tuple=True)`` at its bound: one long index per dim, each of ``numel``."""
    rows = max(source.numel(), 0)
    return tuple(
        _marked(torch.zeros((rows,), dtype=torch.long, device=source.device), (0,))
        for _ in range(max(source.dim(), 1))
    )


def _is_mask(torch: Any, item: Any) -> bool:
    return isinstance(item, torch.Tensor) and item.dtype in (torch.bool, torch.uint8)


def _dims_before(before: tuple[Any, ...], ndim: int, items: tuple[Any, ...]) -> int:
    """Where the selected rows land in the result: after the dims that the index items
    before the mask keep (a slice or ``None`` keeps one, an integer none, ``...`` the rest)."""
    kept = 0
    for item in before:
        if item is None or isinstance(item, slice):
            kept += 1
        elif item is Ellipsis:
            used = sum(
                1 if i is not None and i is not Ellipsis else 0 for i in items
            )  # dims the other items index
            kept += max(ndim - used, 0)
    return kept


def _marked(tensor: Any, dims: tuple[int, ...]) -> Any:
    bounded.mark(tensor, dims)
    return tensor
