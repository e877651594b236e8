"""``nonfinite``: the first line where a tensor holds NaN or Inf, at bounded cost.

What is checked (documented in docs/findings.md): floating and complex tensors on the CPU
(GPU only when opted in: reading a result back synchronises the device) with at most
``nonfinite_max_elements`` elements, on each (line, variable)'s hits 1, 2, 4, 8, ...
(so a 10^6-iteration loop costs ~20 checks per variable), until the first one is found.
A check is one reduction (``sum``); only a non-finite sum is confirmed element-wise.
"""

from __future__ import annotations

import cmath
import sys
from typing import Any

from shapelens.engine import values


def nonfinite_state(value: Any, kind: int, max_elements: int, on_gpu: bool) -> str | None:
    """``"NaN"``, ``"Inf"`` or ``None`` (finite, or not checked). Never raises."""
    try:
        if kind == values.TORCH:
            return _torch_state(value, max_elements, on_gpu)
        if kind == values.ARRAY and type(value).__module__ == "numpy":
            return _numpy_state(value, max_elements)
    except Exception:
        return None
    return None


def _torch_state(tensor: Any, max_elements: int, on_gpu: bool) -> str | None:
    dtype = tensor.dtype
    if not (dtype.is_floating_point or dtype.is_complex):
        return None
    if tensor.device.type != "cpu" and not on_gpu:
        return None
    if tensor.layout is not sys.modules["torch"].strided or tensor.is_nested:
        return None
    if tensor.numel() > max_elements or tensor.numel() == 0:
        return None
    detached = tensor.detach()
    if cmath.isfinite(detached.sum().item()):
        return None
    if bool(detached.isnan().any()):
        return "NaN"
    return "Inf" if bool(detached.isinf().any()) else None  # the sum overflowed, values are finite


def _numpy_state(array: Any, max_elements: int) -> str | None:
    if array.dtype.kind not in "fc" or array.size > max_elements or array.size == 0:
        return None
    numpy = sys.modules["numpy"]
    with numpy.errstate(all="ignore"):
        if cmath.isfinite(complex(array.sum())):
            return None
        if bool(numpy.isnan(array).any()):
            return "NaN"
        return "Inf" if bool(numpy.isinf(array).any()) else None
