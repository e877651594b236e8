"""TorchSnooper's value formats, reading metadata only.

``tensor<(5, 8), float32, cpu, grad>``, named dims ``tensor<(A=5, B=8), ...>``,
``has_nan``/``has_inf`` under the same bounded rules as the engine's ``nonfinite`` finding
(CPU tensors up to a size limit; GPU only on opt-in, since reading a result back
synchronises the device), ``ndarray<(2, 2), float64>``, and every ``torch.return_types``
value as ``aminmax(min=tensor<...>, max=tensor<...>)``. No ``repr`` of a tensor, ever: a
meta, sparse or nested tensor prints like any other instead of ``REPR FAILED``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import Any

from shapelens.engine.findings.nonfinite_scan import nonfinite_flags
from shapelens.engine.recording import values
from shapelens.engine.recording.values import dtype_name
from shapelens.present.shapes import shape_text
from shapelens.settings.groups import FindingsConfig

DEFAULT_PROPERTIES = ("shape", "dtype", "device", "requires_grad", "has_nan", "has_inf")
_FINDINGS = FindingsConfig()
"""The engine's bounds on the NaN/Inf scan: ``has_nan``/``has_inf`` keep to the same ones."""


def _torch() -> Any:
    return sys.modules.get("torch")


def is_tensor(value: Any) -> bool:
    torch = _torch()
    return torch is not None and isinstance(value, torch.Tensor)


def is_ndarray(value: Any) -> bool:
    numpy = sys.modules.get("numpy")
    return numpy is not None and isinstance(value, numpy.ndarray)


def is_return_type(value: Any) -> bool:
    return type(value).__module__ == "torch.return_types"


class TensorFormat:
    """Formats a tensor from its metadata (same parameters as torchsnooper's)."""

    def __init__(
        self,
        property_name: bool = False,
        properties: Sequence[str] = DEFAULT_PROPERTIES,
        nonfinite_max_elements: int = _FINDINGS.nonfinite_max_elements,
        nonfinite_on_gpu: bool = _FINDINGS.nonfinite_on_gpu,
    ) -> None:
        for name in properties:
            if not hasattr(self, "repr_" + name):
                raise ValueError(f"Unknown tensor property: {name!r}")
        self.properties = tuple(properties)
        self.properties_name = property_name
        self.nonfinite_max_elements = nonfinite_max_elements
        self.nonfinite_on_gpu = nonfinite_on_gpu

    def repr_shape(self, tensor: Any) -> str:
        try:
            shape = tuple(int(d) for d in tensor.shape)
        except Exception:
            return "(?)"  # nested tensors have no single shape
        names = getattr(tensor, "names", None)
        named = names if names and any(n is not None for n in names) else None
        return shape_text(shape, python=True, names=named)

    def repr_dtype(self, tensor: Any) -> str:
        return dtype_name(tensor.dtype) or "?"

    def repr_device(self, tensor: Any) -> str:
        return str(tensor.device)

    def _flag(self, name: str, value: bool | None) -> str:
        if self.properties_name:
            return "?" if value is None else str(value)
        return name if value else ""

    def repr_requires_grad(self, tensor: Any) -> str:
        return self._flag("grad", bool(tensor.requires_grad))

    def repr_has_nan(self, tensor: Any) -> str:
        return self._flag("has_nan", self._nonfinite(tensor, "nan"))

    def repr_has_inf(self, tensor: Any) -> str:
        return self._flag("has_inf", self._nonfinite(tensor, "inf"))

    def _nonfinite(self, tensor: Any, kind: str) -> bool | None:
        """True/False when checked, None when the bounded rules skip this tensor."""
        flags = nonfinite_flags(
            tensor, values.TORCH, self.nonfinite_max_elements, self.nonfinite_on_gpu
        )
        if flags is None:
            return None
        return flags[0] if kind == "nan" else flags[1]

    def __call__(self, tensor: Any) -> str:
        parts: list[str] = []
        for name in self.properties:
            try:
                text = getattr(self, "repr_" + name)(tensor)
            except Exception:
                text = "?"
            if self.properties_name:
                text = f"{name}={text}"
            if text:
                parts.append(text)
        return "tensor<" + ", ".join(parts) + ">"


class NumpyFormat:
    def __call__(self, array: Any) -> str:
        return f"ndarray<{shape_text(array.shape, python=True)}, {array.dtype.name}>"


default_format = TensorFormat()
default_numpy_format = NumpyFormat()


def format_value(
    value: Any,
    tensor_format: Callable[[Any], str],
    numpy_format: Callable[[Any], str],
    fallback: Callable[[Any], str],
    depth: int = 0,
) -> str:
    """A value as TorchSnooper shows it; containers recursively (bounded depth)."""

    def again(item: Any) -> str:
        return format_value(item, tensor_format, numpy_format, fallback, depth + 1)

    if is_tensor(value):
        return tensor_format(value)
    if is_ndarray(value):
        return numpy_format(value)
    if is_return_type(value):
        fields = getattr(type(value), "__match_args__", ()) or ()
        items = tuple.__iter__(value)
        inner = ", ".join(
            f"{name}={again(item)}" for name, item in zip(fields, items, strict=False)
        )
        return f"{type(value).__name__}({inner})"
    if depth >= 4:
        return fallback(value)
    if isinstance(value, tuple) and hasattr(type(value), "_fields"):  # namedtuple
        names = type(value)._fields  # type: ignore[attr-defined]
        inner = ", ".join(f"{k}={again(v)}" for k, v in zip(names, value, strict=False))
        return f"{type(value).__name__}({inner})"
    if isinstance(value, (list, tuple)):
        content = ", ".join(again(item) for item in value)
        if isinstance(value, tuple):
            return "(" + content + ("," if len(value) == 1 else "") + ")"
        return "[" + content + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{again(k)}: {again(v)}" for k, v in value.items()) + "}"
    return fallback(value)
