"""Why a torch call failed, found from the call itself: it is called again on meta tensors.

A meta tensor has a shape, dtype and strides but no data and no device, so calling the
failing function again on meta copies of its operands costs microseconds, touches nothing
of the program and answers what torch's message only words: it runs on meta (the operands'
metadata is fine: their devices or their values failed), it runs once one operand has
another dtype (that operand's dtype failed), or it fails whatever the dtypes (the shapes
do). No message is read.
"""

from __future__ import annotations

import contextlib
import warnings
from dataclasses import dataclass
from typing import Any

from shapelens.engine import torch_compat, values

_MAX_TENSORS = 6
"""Operands tried one at a time with another dtype (the first ones)."""


@dataclass(frozen=True)
class Verdict:
    """What the failed call's operands did wrong.

    ``kind``: ``device_mismatch``, ``dtype_mismatch``, ``shape_mismatch`` or ``op_error``;
    a disagreement between operands' devices or floating dtypes is told without a trial
    (``odd`` is None: the majority, or a module's parameters, set what is expected);
    ``odd``: the index (among the call's tensors, in argument order) of the operand whose
    dtype failed; ``expected``: the dtype it runs with; ``on_values``: the call runs on its
    operands' metadata, so their values (an index out of range) made it fail."""

    kind: str
    odd: int | None = None
    expected: str | None = None
    on_values: bool = False


def tensors_of(torch: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[Any]:
    """The call's tensor operands, in argument order (inside lists too: ``torch.cat``)."""
    return [
        leaf for leaf in torch_compat.tree_leaves((args, kwargs)) if isinstance(leaf, torch.Tensor)
    ]


def judge(torch: Any, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Verdict:
    """The verdict on ``func(*args, **kwargs)``, which raised."""
    tensors = tensors_of(torch, args, kwargs)
    devices = {values.device_name(t.device) for t in tensors if t.dim() > 0}
    floats = {t.dtype for t in tensors if t.dtype.is_floating_point and t.dim() > 0}
    if len(floats) > 1:
        return Verdict("dtype_mismatch")  # meta kernels often let this pass: no trial tells
    # 0-dim CPU tensors mix with any device: only tensors with dims count.
    other_devices = "device_mismatch" if len(devices) > 1 else None
    if _runs(torch, func, args, kwargs, tensors, None, None):  # all on one device: meta
        return Verdict(other_devices or "op_error", on_values=other_devices is None)
    for index, tensor in enumerate(tensors[:_MAX_TENSORS]):
        for dtype in _other_dtypes(torch, tensor, tensors):
            if _runs(torch, func, args, kwargs, tensors, index, dtype):
                return Verdict("dtype_mismatch", odd=index, expected=values.dtype_name(dtype))
    return Verdict(other_devices or ("shape_mismatch" if tensors else "op_error"))


def _other_dtypes(torch: Any, tensor: Any, tensors: list[Any]) -> list[Any]:
    """The dtypes ``tensor`` might have been meant to have, likeliest first: the other
    operands' floating dtype, then an index (int64), a mask (bool), a float (float32)."""
    dtype = tensor.dtype
    floats = [t.dtype for t in tensors if t is not tensor and t.dtype.is_floating_point]
    found: list[Any] = []
    if dtype.is_floating_point and floats and floats[0] != dtype:
        found.append(floats[0])
    if dtype.is_floating_point:
        found.append(torch.int64)
    elif dtype != torch.bool:
        found.append(torch.bool)
    if not dtype.is_floating_point:
        found.append(floats[0] if floats else torch.float32)
    return found


def _runs(
    torch: Any,
    func: Any,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    tensors: list[Any],
    changed: int | None,
    dtype: Any,
) -> bool:
    """Whether the call runs on meta copies of its tensors (operand ``changed`` as ``dtype``)."""
    try:
        copies = {
            id(t): _meta(torch, t, dtype if i == changed else t.dtype)
            for i, t in enumerate(tensors)
        }
        meta_args, meta_kwargs = torch_compat.tree_map(
            lambda leaf: copies.get(id(leaf), leaf), (args, kwargs)
        )
        with warnings.catch_warnings(), contextlib.redirect_stdout(None):
            warnings.simplefilter("ignore")
            func(*meta_args, **meta_kwargs)
    except Exception:
        return False
    return True


def _meta(torch: Any, tensor: Any, dtype: Any) -> Any:
    """A meta tensor like ``tensor`` (shape, strides, autograd flag), of ``dtype``."""
    copy = torch.empty_strided(
        tuple(tensor.shape), tuple(tensor.stride()), dtype=dtype, device="meta"
    )
    if tensor.requires_grad and dtype.is_floating_point:
        copy.requires_grad_(True)
    return copy
