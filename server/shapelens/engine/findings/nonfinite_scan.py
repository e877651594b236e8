"""The bounded NaN/Inf scan of a value: floating and complex tensors on the CPU (GPU only
when opted in: reading a result back synchronises the device) with at most
``max_elements`` elements; one reduction (``sum``), confirmed element-wise only when it is
not finite. Never raises; never runs on fake tensors or inside a compiled graph.
"""

from __future__ import annotations

import cmath
import sys
from typing import Any

from shapelens.engine.recording import values
from shapelens.engine.torch_support import torch_compat
from shapelens.lazy_regex import LazyPattern


class NonfiniteScan:
    """The scan under one run's bounds (``findings.nonfiniteMaxElements``, ``OnGpu``)."""

    def __init__(self, max_elements: int, on_gpu: bool) -> None:
        self.max_elements = max_elements
        self.on_gpu = on_gpu

    def state(self, value: Any, kind: int) -> str | None:
        """``"NaN"``, ``"Inf"`` or ``None`` (finite, or not checked under the bounds)."""
        return nonfinite_state(value, kind, self.max_elements, self.on_gpu)

    def flags(self, value: Any, kind: int) -> tuple[bool, bool] | None:
        return nonfinite_flags(value, kind, self.max_elements, self.on_gpu)


def nonfinite_state(value: Any, kind: int, max_elements: int, on_gpu: bool) -> str | None:
    """``"NaN"``, ``"Inf"`` or ``None`` (finite, or not checked). Never raises."""
    flags = nonfinite_flags(value, kind, max_elements, on_gpu)
    if flags is None:
        return None
    has_nan, has_inf = flags
    return "NaN" if has_nan else "Inf" if has_inf else None


def nonfinite_flags(
    value: Any, kind: int, max_elements: int, on_gpu: bool
) -> tuple[bool, bool] | None:
    """``(has_nan, has_inf)``, or ``None`` when the bounded rules skip this value (too big, on
    a GPU without opt-in, sparse or nested). Integer and bool values are finite. Never raises."""
    try:
        if kind == values.TORCH:
            return _torch_flags(value, max_elements, on_gpu)
        if kind == values.ARRAY and type(value).__module__ == "numpy":
            return _numpy_flags(value, max_elements)
    except Exception:
        return None
    return None


def _torch_flags(tensor: Any, max_elements: int, on_gpu: bool) -> tuple[bool, bool] | None:
    if type(tensor) in values.SHARDED_TYPES:  # its own shard: the whole would be a collective
        tensor = torch_compat.local_shard(tensor)
    dtype = tensor.dtype
    if not (dtype.is_floating_point or dtype.is_complex):
        return False, False
    if tensor.device.type != "cpu" and not on_gpu:
        return None
    if tensor.layout is not sys.modules["torch"].strided or tensor.is_nested:
        return None
    if tensor.numel() > max_elements:
        return None
    if tensor.numel() == 0:
        return False, False
    if _tracing(sys.modules["torch"]):
        return None
    detached = tensor.detach()
    if cmath.isfinite(detached.sum().item()):  # one reduction: finite means neither
        return False, False
    return bool(detached.isnan().any()), bool(detached.isinf().any())


def _tracing(torch: Any) -> bool:
    """torch.compile/export is tracing, or a dispatch mode (fake tensors, a user's mode) is
    active: our reduction would run on fake data or be recorded into their graph."""
    is_compiling = getattr(getattr(torch, "compiler", None), "is_compiling", None)
    if is_compiling is not None and is_compiling():
        return True
    return torch_compat.dispatch_mode_active(torch)


def _numpy_flags(array: Any, max_elements: int) -> tuple[bool, bool] | None:
    if array.dtype.kind not in "fc" or array.size == 0:
        return False, False
    if array.size > max_elements:
        return None
    numpy = sys.modules["numpy"]
    with numpy.errstate(all="ignore"):
        if cmath.isfinite(complex(array.sum())):
            return False, False
        return bool(numpy.isnan(array).any()), bool(numpy.isinf(array).any())


# An Inf made on purpose: a causal or padding mask (docs/findings.md).
_MASK_TEXT = LazyPattern(
    r"masked_fill|\bwhere\(|float\(\s*['\"][+-]?inf|\b(math|torch|np|numpy)\.inf\b"
    r"|-\s*inf\b|finfo\([^)]*\)\.(min|max)|\bmask\b.*\blog\(|log\(.*\b(tril|triu|mask|eye)"
    r"|\w*_mask\s*\("  # a function that makes one: generate_square_subsequent_mask(T)
)
_LOG = LazyPattern(r"\blog\(|\.log\(\)")


def is_mask_text(text: str) -> bool:
    return bool(_MASK_TEXT.search(text))


def takes_log(text: str) -> bool:
    return bool(_LOG.search(text))


def holds_only_zero_or_inf(value: Any) -> bool:
    """``log`` of a 0/1 mask gives exactly 0 and -inf; a real underflow gives other values."""
    try:
        if values.kind_of(value) == values.TORCH:
            data = torch_compat.local_shard(value).detach()
            return bool(((data == 0) | data.isinf()).all())
        numpy = sys.modules.get("numpy")
        if numpy is not None and isinstance(value, numpy.ndarray):
            return bool(((value == 0) | numpy.isinf(value)).all())
    except Exception:
        return False
    return False
