"""How a paused debugger shows tensors: ``Tensor (5,3) f32 cpu grad``, never their data.

Used by the pydevd plugin ShapeLens ships with its runner (``pydevd_root/``): Variables,
Watch, the debug hover and the Debug Console ask it for a value's text and its children.
Every text here reads metadata only (no ``repr`` of a tensor, no copy, no GPU sync); the one
exception is :class:`ValuesPreview`, which reads a bounded number of values only when the
user expands it, and says beforehand when that synchronises a GPU.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable
from typing import Any

from shapelens.engine.recording.values import (
    ARRAY,
    CONTAINER_KINDS,
    DATACLASS,
    MAPPING,
    NAMED_TUPLE,
    TORCH,
    container_entries,
    device_name,
    dtype_name,
    kind_of,
)
from shapelens.engine.torch_support import torch_compat
from shapelens.present.shapes import metadata_text

PREVIEW_VALUES = 100
"""The most values a preview reads (from the start of the flattened tensor)."""
SUMMARY_ENTRIES = 4
"""Entries named in a container's or a module's one-line summary."""

Child = tuple[str, Any, "str | Callable[[str], str] | None"]
"""(name, value, evaluate suffix): pydevd appends the suffix to the parent's expression."""


def tensor_label(value: Any) -> str:
    """``(5,3) f32 cpu grad``: shape, dtype, device and requires_grad, from metadata."""
    try:
        shape: tuple[int, ...] | None = tuple(int(d) for d in value.shape)
    except Exception:
        shape = None
    dtype = dtype_name(getattr(value, "dtype", None))
    text = metadata_text(shape, dtype, device_name(getattr(value, "device", None)), short=True)
    return text + " grad" if getattr(value, "requires_grad", False) is True else text


def is_tensor_like(value: Any) -> bool:
    return kind_of(value) in (TORCH, ARRAY)


def is_module(value: Any) -> bool:
    torch = sys.modules.get("torch")
    module = getattr(getattr(torch, "nn", None), "Module", None)
    return module is not None and isinstance(value, module)


def summary(value: Any) -> str | None:
    """The one-line text of a tensor, an array, a module, or a container holding tensors;
    ``None`` for anything else (the debugger's own text is right for it)."""
    try:
        if is_tensor_like(value):
            return f"{type(value).__name__} {tensor_label(value)}"
        if is_module(value):
            return _module_summary(value)
        kind = kind_of(value)
        if kind in CONTAINER_KINDS:
            return _container_summary(value, kind)
    except Exception:
        return None
    return None


def _container_summary(value: Any, kind: int) -> str | None:
    """``dict {'image': (2,3) f16 cpu, 'id': 3}``, ``Batch(x=(8,2) f32 cpu, y=(8,) f32 cpu)``,
    ``list [(4,3) f32 cpu, 'label']``: Python's spelling, tensors by label."""
    entries = list(container_entries("", value, kind))
    if not any(is_tensor_like(item) or summary(item) for _, item in entries):
        return None
    shown = []
    for name, item in entries[:SUMMARY_ENTRIES]:
        if kind == MAPPING:
            shown.append(f"{name[1:-1]}: {_short(item)}")
        elif kind in (DATACLASS, NAMED_TUPLE):
            shown.append(f"{name.lstrip('.')}={_short(item)}")
        else:
            shown.append(_short(item))
    size = len(dataclasses.fields(value)) if kind == DATACLASS else len(value)
    if size > len(shown):
        shown.append(f"… {size - len(shown)} more")
    body = ", ".join(shown)
    name = type(value).__name__
    if kind == MAPPING:
        return f"{name} {{{body}}}"
    if kind in (DATACLASS, NAMED_TUPLE):
        return f"{name}({body})"
    return f"{name} [{body}]" if isinstance(value, list) else f"{name} ({body})"


def _short(item: Any) -> str:
    """An entry inside a summary: tensors by label, containers by size, others by type."""
    if is_tensor_like(item):
        return tensor_label(item)
    if is_module(item):
        return type(item).__name__
    kind = kind_of(item)
    if kind in CONTAINER_KINDS:
        return f"{type(item).__name__}[{len(item) if hasattr(item, '__len__') else '?'}]"
    if isinstance(item, (int, float, bool, str)) and len(repr(item)) <= 20:
        return repr(item)
    return type(item).__name__


def _module_summary(module: Any) -> str:
    """``Linear · 3 params · weight (1,2) f32 cpu grad, bias (1,) f32 cpu grad``."""
    params = 0
    for parameter in module.parameters():
        params += parameter.numel()
    own = list(torch_compat.own_parameters(module).items())[:SUMMARY_ENTRIES]
    parts = [type(module).__name__, f"{count_text(params)} params"]
    if own:
        parts.append(", ".join(f"{n} {tensor_label(p)}" for n, p in own if p is not None))
    elif children := torch_compat.children_by_name(module):
        parts.append(f"{len(children)} children")
    return " · ".join(parts)


def count_text(count: int) -> str:
    """``3``, ``4.2k``, ``124.4M``."""
    for size, suffix in ((1e9, "B"), (1e6, "M"), (1e3, "k")):
        if count >= size:
            return f"{count / size:.1f}{suffix}"
    return str(count)


def tensor_children(value: Any) -> list[Child]:
    """What an expanded tensor shows: its metadata, its grad, and a values preview."""
    children: list[Child] = []

    def add(name: str, read: Callable[[], Any], suffix: str | None) -> None:
        try:
            children.append((name, read(), suffix))
        except Exception as err:  # a property a subclass does not support
            children.append((name, f"unavailable: {err}", None))

    add("shape", lambda: tuple(int(d) for d in value.shape), ".shape")
    add("dtype", lambda: value.dtype, ".dtype")
    add("device", lambda: value.device, ".device")
    add("requires_grad", lambda: bool(value.requires_grad), ".requires_grad")
    add("grad_fn", lambda: value.grad_fn, ".grad_fn")
    add("stride", lambda: tuple(value.stride()), ".stride()")
    add("is_contiguous", lambda: bool(value.is_contiguous()), ".is_contiguous()")
    add("nbytes", lambda: int(value.element_size() * value.nelement()), ".nbytes")
    grad = getattr(value, "grad", None) if getattr(value, "is_leaf", False) else None
    if grad is not None:
        children.append(("grad", grad, ".grad"))
    children.append(("values", ValuesPreview(value), None))
    return children


def array_children(value: Any) -> list[Child]:
    """An expanded array (numpy and alike): metadata and a values preview."""
    children: list[Child] = [
        ("shape", tuple(int(d) for d in value.shape), ".shape"),
        ("dtype", value.dtype, ".dtype"),
    ]
    for name in ("strides", "nbytes"):
        if hasattr(value, name):
            children.append((name, getattr(value, name), f".{name}"))
    children.append(("values", ValuesPreview(value), None))
    return children


class ValuesPreview:
    """The ``values`` child of a tensor: reads at most :data:`PREVIEW_VALUES` values, and only
    when expanded (its text says what expanding costs)."""

    def __init__(self, tensor: Any) -> None:
        self.tensor = tensor

    def __repr__(self) -> str:
        return self.text()

    def text(self) -> str:
        count = _numel(self.tensor)
        reads = f"the first {PREVIEW_VALUES} of {count}" if count > PREVIEW_VALUES else "all"
        device = device_name(getattr(self.tensor, "device", None)) or "cpu"
        if device.startswith(("cuda", "mps", "xpu")):
            return f"expand to read {reads} values (copies from {device}: synchronises it)"
        if device == "meta":
            return "no values: a meta tensor has none"
        return f"expand to read {reads} values"

    def children(self) -> list[Child]:
        """The preview, read now: flattened values, ``PREVIEW_VALUES`` at most."""
        try:
            tensor = self.tensor.detach() if hasattr(self.tensor, "detach") else self.tensor
            flat = tensor.reshape(-1)[:PREVIEW_VALUES]
            values = (flat.cpu() if hasattr(flat, "cpu") else flat).tolist()
        except Exception as err:
            return [("error", f"cannot read values: {err}", None)]
        count = _numel(self.tensor)
        children: list[Child] = [(f"[{i}]", v, None) for i, v in enumerate(values)]
        if count > len(values):
            children.append(("…", f"{count - len(values)} more not read", None))
        return children


def _numel(value: Any) -> int:
    count = getattr(value, "size", None)
    if isinstance(count, int):  # numpy: size is the element count
        return count
    try:
        return int(value.numel())
    except Exception:
        return 0


def may_summarise(tp: type) -> bool:
    """Whether values of ``tp`` may get a summary (decided per type; :func:`summary` still
    returns ``None`` for a container without tensors)."""
    if tp in (list, tuple, dict) or dataclasses.is_dataclass(tp):
        return True
    if issubclass(tp, (list, tuple, dict)):
        return True
    torch = sys.modules.get("torch")
    tensor = getattr(torch, "Tensor", None)
    module = getattr(getattr(torch, "nn", None), "Module", None)
    if tensor is not None and issubclass(tp, tensor):
        return True
    if module is not None and issubclass(tp, module):
        return True
    return hasattr(tp, "shape") and hasattr(tp, "dtype")


def resolves(tp: type) -> bool:
    """Whether an expanded value of ``tp`` shows our children (tensors, arrays, previews)."""
    if tp is ValuesPreview:
        return True
    torch = sys.modules.get("torch")
    tensor = getattr(torch, "Tensor", None)
    if tensor is not None and issubclass(tp, tensor):
        return True
    return hasattr(tp, "shape") and hasattr(tp, "dtype")


def children(value: Any) -> list[Child]:
    if isinstance(value, ValuesPreview):
        return value.children()
    if kind_of(value) == TORCH:
        return tensor_children(value)
    return array_children(value)
