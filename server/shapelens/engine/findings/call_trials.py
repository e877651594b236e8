"""Why a torch call failed, found from the call itself: it is called again on meta tensors.

A meta tensor has a shape, dtype and strides but no data and no device, so calling the
failing function again on meta copies of its operands costs microseconds, touches nothing
of the program and answers what torch's message only words: it runs on meta (the operands'
metadata is fine: their devices or their values failed), it runs once one operand has
another dtype (that operand's dtype failed), or it fails whatever the dtypes (the shapes
do). No message is read.

Meta kernels are not always as strict as the real ones (torch 2.4's
``binary_cross_entropy_with_logits`` takes an int64 target on meta, its CPU kernel does not).
So a call that runs on meta is tried once more on new CPU tensors of the same shapes and
dtypes filled with zeros, then with ones (an index needs 0 in range, a probability needs
a non-zero sum), where they are small (never the program's own data, never a module's
parameters): only if it runs on one of them did the values fail; if not, the dtype trials
are made on such tensors.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from shapelens.engine.recording import values
from shapelens.engine.torch_support import torch_compat

_MAX_TENSORS = 6
"""Operands tried one at a time with another dtype (the first ones)."""
_MAX_PLAIN = 1 << 16
"""Elements, over all operands, up to which a call is tried on CPU tensors of plain values."""
Maker = Callable[[Any, Any, Any], Any]
"""(torch, tensor, dtype) → a copy of the tensor's shape, of that dtype, to try the call on."""


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
    makers: tuple[Maker, ...] = (_meta,)
    if _runs(torch, func, args, kwargs, tensors, None, None, _meta):  # all on one device: meta
        if other_devices is not None:
            return Verdict(other_devices)
        makers = (_zeros, _ones)
        if not _plain_values_fit(torch, func, tensors) or any(
            _runs(torch, func, args, kwargs, tensors, None, None, make) for make in makers
        ):
            return Verdict("op_error", on_values=True)
        # meta let it pass: the real kernel is stricter, so the trials are made for real
    for index, tensor in enumerate(tensors[:_MAX_TENSORS]):
        for dtype in _other_dtypes(torch, tensor, tensors):
            if any(
                _runs(torch, func, args, kwargs, tensors, index, dtype, make) for make in makers
            ):
                return Verdict("dtype_mismatch", odd=index, expected=values.dtype_name(dtype))
    return Verdict(other_devices or ("shape_mismatch" if tensors else "op_error"))


def _plain_values_fit(torch: Any, func: Any, tensors: list[Any]) -> bool:
    """Whether the call may be tried on new tensors of plain values: small CPU tensors, no fake
    tensors (their mode would make the zeros fake), and no module (its parameters are the
    program's own)."""
    return (
        not isinstance(func, torch.nn.Module)
        and not torch_compat.dispatch_mode_active(torch)
        and all(t.device.type == "cpu" for t in tensors)
        and sum(t.numel() for t in tensors) <= _MAX_PLAIN
    )


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
    make: Maker,
) -> bool:
    """Whether the call runs on copies of its tensors made by ``make`` (meta, zeros, ones),
    operand ``changed`` as ``dtype``."""
    try:
        copies = {
            id(t): make(torch, t, dtype if i == changed else t.dtype) for i, t in enumerate(tensors)
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


def _zeros(torch: Any, tensor: Any, dtype: Any) -> Any:
    """New zeros on the CPU, shaped like ``tensor``, of ``dtype`` (none of its data)."""
    return _grad_like(tensor, torch.zeros(tuple(tensor.shape), dtype=dtype))


def _ones(torch: Any, tensor: Any, dtype: Any) -> Any:
    return _grad_like(tensor, torch.ones(tuple(tensor.shape), dtype=dtype))


def _grad_like(tensor: Any, copy: Any) -> Any:
    if tensor.requires_grad and copy.dtype.is_floating_point:
        copy.requires_grad_(True)
    return copy


def _meta(torch: Any, tensor: Any, dtype: Any) -> Any:
    """A meta tensor like ``tensor`` (shape, strides, autograd flag), of ``dtype``."""
    copy = torch.empty_strided(
        tuple(tensor.shape), tuple(tensor.stride()), dtype=dtype, device="meta"
    )
    if tensor.requires_grad and dtype.is_floating_point:
        copy.requires_grad_(True)
    return copy
