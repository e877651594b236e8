"""Which steps of a failing value's chain tell its story (:meth:`Provenance.chain` asks a
filter of each step, from the failing value back): for a dtype or device error the steps
that changed it; for shapes, those that changed the dims the operands disagree in, or the
dim a layer reads its size from (followed through the flatten that made it)."""

from __future__ import annotations

from typing import Any

from shapelens.engine.findings.provenance import Changed

_ATTRIBUTE = {"dtype_mismatch": "dtype", "device_mismatch": "device"}


_INPUT_DIM = {
    "Linear": -1, "Bilinear": -1, "LayerNorm": -1, "LSTM": -1, "GRU": -1, "RNN": -1,
    "MultiheadAttention": -1, "Conv1d": 1, "Conv2d": 1, "Conv3d": 1, "ConvTranspose1d": 1,
    "ConvTranspose2d": 1, "ConvTranspose3d": 1, "BatchNorm1d": 1, "BatchNorm2d": 1,
    "BatchNorm3d": 1, "GroupNorm": 1, "InstanceNorm1d": 1, "InstanceNorm2d": 1,
}  # fmt: skip
"""The dim of its input a layer reads its size from (features last, channels second)."""


def input_dim_changed(layer: str, shapes: list[Any], wanted: int | None = None) -> Changed:
    """Steps that set the dim ``layer`` reads to the size it had when the layer refused it
    (an earlier size that a later step replaced has nothing to do with it), and a join along
    another dim that along this one would have made the size it ``wanted`` (see
    :func:`joined_instead`); any shape change for a layer whose dim is not known."""
    dim = _INPUT_DIM.get(layer)
    finals = {_size(tuple(shape), dim) for shape in shapes if shape is not None} if dim else set()
    if dim is None or None in finals or not finals:
        return lambda before, after: before is None or before[0] != after[0]
    return _SizeSetBy(dim, {size for size in finals if size is not None}, wanted)


def input_dim_of(layer: str) -> int | None:
    """The dim of its input ``layer`` reads its size from, where known."""
    return _INPUT_DIM.get(layer)


def joined_instead(
    before: tuple[int, ...] | None, after: tuple[int, ...] | None, dim: int, wanted: int
) -> tuple[int, int, tuple[int, ...]] | None:
    """(the dim a step joined along, the dim it would have fitted along, the shape that
    would have made) where, joined along ``dim`` instead, the same parts would have made it
    ``wanted`` long: ``torch.cat`` of three (16, 32) along dim 0 gives (48, 32), along dim 1
    the (16, 96) a ``Linear(96, …)`` takes. Only one dim other than ``dim`` changed, by a
    whole factor."""
    if before is None or after is None or len(before) != len(after) or not before:
        return None
    meant = dim % len(after)
    grown = [d for d in range(len(after)) if before[d] != after[d]]
    if len(grown) != 1 or grown[0] == meant:
        return None
    along = grown[0]
    if before[along] <= 0 or after[along] % before[along]:
        return None
    parts = after[along] // before[along]
    if parts < 2 or before[meant] * parts != wanted:
        return None
    would_be = tuple(wanted if d == meant else before[d] for d in range(len(before)))
    return along, meant, would_be


class _SizeSetBy:
    """A chain's filter, asked from the failing value back: the step that set the dim to
    its final size; where that step flattened trailing dims into it (``flatten(x, 1)`` of a
    (B, 64, 4, 4)), then the step that set those dims as they were flattened (the pooling
    that made them 4 x 4) or changed the rank ahead of them, and nothing before it."""

    def __init__(self, dim: int, finals: set[int], wanted: int | None = None) -> None:
        self.dim = dim
        self.finals = finals
        self.wanted = wanted
        self.tail: tuple[int, ...] | None = None
        self.done = False

    def __call__(self, before: Any, after: Any) -> bool:
        if before is None:
            return True
        old, new = before[0], after[0]
        if old is None or new is None or self.done:
            return False
        if self.tail is not None:
            count = len(self.tail)
            if tuple(new[-count:]) != self.tail:
                return False
            if tuple(old[-count:]) == self.tail and len(old) == len(new):
                return False
            # Found: what made those dims so, or what moved the dims kept ahead of them
            # (a squeeze that dropped the batch of one); before it is another story.
            self.done = True
            return True
        if self.wanted is not None and joined_instead(old, new, self.dim, self.wanted):
            return True  # where the wrong value started, though the dim kept its size
        size = _size(new, self.dim)
        if size not in self.finals or _size(old, self.dim) == size:
            return False
        self.tail = _flattened_into(old, new, self.dim)
        return True


def _flattened_into(old: tuple[int, ...], new: tuple[int, ...], dim: int) -> tuple[int, ...] | None:
    """The trailing dims of ``old`` that a flatten or view made into ``new``'s last dim."""
    if dim not in (-1, len(new) - 1) or len(old) <= len(new):
        return None
    count = len(old) - len(new) + 1
    tail = tuple(old[-count:])
    product = 1
    for size in tail:
        product *= size
    return tail if product == new[-1] and tuple(old[:-count]) == tuple(new[:-1]) else None


def what_failed(kind: str, shapes: list[Any]) -> Changed:
    """Which steps a chain keeps: those that changed the dtype (device) for a dtype (device)
    error; for shapes that differ in some dims, those that changed one of those dims (counted
    from the right for shapes of one rank, as broadcasting does; from the left, the batch
    first, for shapes of different ranks: logits (N, C) and targets (N,)); for shapes of
    different ranks that agree where both have dims, those that changed the rank; else
    every step that changed the shape."""
    if kind in _ATTRIBUTE:
        field = 1 if kind == "dtype_mismatch" else 2
        return lambda before, after: before is None or before[field] != after[field]
    known = [tuple(shape) for shape in shapes if shape is not None]
    if len(known) < 2:
        return lambda before, after: before is None or before[0] != after[0]
    ranks = {len(shape) for shape in known}
    if len(ranks) == 1:
        dims = [-d for d in range(1, min(ranks) + 1) if len({s[-d] for s in known}) > 1]
    else:
        dims = [d for d in range(min(ranks)) if len({s[d] for s in known}) > 1]
    if not dims and len(ranks) > 1:
        return lambda before, after: before is None or _rank(before[0]) != _rank(after[0])
    if not dims:
        return lambda before, after: before is None or before[0] != after[0]
    # The failing sizes, wherever an op put them: a step that made one of them appear is
    # where it was set, also through ops that changed the rank (an embedding adds a dim).
    sizes = {size for shape in known for d in dims if (size := _size(shape, d)) is not None}
    return lambda before, after: (
        before is None
        or any(_size(before[0], d) != _size(after[0], d) for d in dims)
        or _appeared(before[0], after[0], sizes)
    )


def _appeared(
    before: tuple[int, ...] | None, after: tuple[int, ...] | None, sizes: set[int]
) -> bool:
    """A step made a dim of one of ``sizes`` that its input did not have."""
    if before is None or after is None:
        return False
    return any(after.count(size) > before.count(size) for size in sizes if size != 1)


def _rank(shape: tuple[int, ...] | None) -> int | None:
    return None if shape is None else len(shape)


def _size(shape: tuple[int, ...] | None, dim: int) -> int | None:
    """``shape[dim]`` (negative: from the right), None where it has no such dim."""
    if shape is None or (dim >= len(shape) if dim >= 0 else -dim > len(shape)):
        return None
    return shape[dim]
