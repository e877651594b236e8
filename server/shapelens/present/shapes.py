"""The one place that writes a shape, a dtype or a device as text.

Two spellings of a shape: ``compact`` for hints, tables and listings (``(4,1)``), and
``python`` for sentences and TorchSnooper's log (``(4, 1)``). Either may name its dims:
``(B=5, T=8)`` in hover, ``(B=5,T=8)`` or ``(B,T)`` in a hint. A 1-dim shape keeps its
comma, as Python writes a 1-tuple: ``(4,)``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

DTYPE_ABBREVIATIONS = {
    "float32": "f32",
    "float64": "f64",
    "float16": "f16",
    "bfloat16": "bf16",
    "int64": "i64",
    "int32": "i32",
    "int16": "i16",
    "int8": "i8",
    "uint8": "u8",
    "complex64": "c64",
    "complex128": "c128",
    "bool": "bool",
}


BOUND_MARK = "≤"
"""Before a dim's size that is only its bound (a shape-only run's boolean-mask selection)."""


def shape_text(
    shape: Sequence[int] | None,
    *,
    python: bool = False,
    names: Sequence[str | None] | None = None,
    sizes: bool = True,
    bounded: Sequence[int] = (),
) -> str:
    """``(4,1)``; with ``python``: ``(4, 1)``. With ``names`` (one per dim, None where a dim
    has none): ``(B=4,1)``, or ``(B,1)`` without ``sizes``. ``bounded`` dims are written as
    bounds: ``(≤32,8)``."""
    if shape is None:
        return "(?)"
    dims = [str(int(d)) for d in shape]
    for index in bounded:
        if 0 <= index < len(dims):
            dims[index] = BOUND_MARK + dims[index]
    return joined_dims(dims, python, names, sizes)


def ranged_shape_text(
    ranges: Sequence[tuple[int, int]],
    *,
    python: bool = False,
    names: Sequence[str | None] | None = None,
    sizes: bool = True,
    bounded: Sequence[int] = (),
) -> str:
    """``(2,1‥5,6)``: a shape whose dims varied, each varying dim as ``min‥max``; named like
    :func:`shape_text`: ``(B=2,T=1‥5,C=6)``; ``bounded`` dims as their largest bound."""
    dims = [str(lo) if lo == hi else f"{lo}‥{hi}" for lo, hi in ranges]
    for index in bounded:
        if 0 <= index < len(dims):
            dims[index] = BOUND_MARK + str(ranges[index][1])
    return joined_dims(dims, python, names, sizes)


def joined_dims(
    dims: Sequence[str], python: bool, names: Sequence[str | None] | None, sizes: bool
) -> str:
    """Dims already written (``4``, ``1‥5``) as one shape, each named as ``names`` says."""
    if names is not None:
        dims = [
            d if n is None else f"{n}={d}" if sizes else n
            for d, n in zip(dims, names, strict=False)
        ]
    if len(dims) == 1:
        return f"({dims[0]},)"
    return "(" + (", " if python else ",").join(dims) + ")"


def alternatives_text(shapes: Sequence[Sequence[int]], limit: int = 3) -> str:
    """``(4,)|(2,2)``: distinct shapes of differing numbers of dims, the first ``limit``."""
    text = "|".join(shape_text(s) for s in shapes[:limit])
    return text + ("|…" if len(shapes) > limit else "")


def number_text(value: float, digits: int = 4) -> str:
    """``4``, ``0.001``, ``1.5``, ``True``, ``nan``: a Python number, 4 significant digits
    (or ``digits``)."""
    if isinstance(value, (bool, int)):
        return str(value)
    text = f"{value:.{digits}g}"
    return text if any(c in text for c in ".enai") else f"{text}.0"  # 0.0 stays a float


def distinct_digits(values: Iterable[float]) -> int:
    """The fewest significant digits, 4 or more, that write different values differently:
    two clock readings a minute apart are both ``1.796e+09`` at 4."""
    finite = {float(v) for v in values if math.isfinite(v)}
    for digits in range(4, 17):
        if len({f"{v:.{digits}g}" for v in finite}) == len(finite):
            return digits
    return 17  # a float's repr: always enough


def scalar_text(value: float, dtype: str | None, digits: int = 4) -> str:
    """A 0-dim tensor's or array's value, read as a float: ``3`` and ``True`` when its dtype
    is an integer or bool one (a label, a class index, a mask), else like a number."""
    if dtype is not None and math.isfinite(value) and value == int(value):
        if dtype == "bool":
            return str(bool(value))
        if dtype.startswith(("int", "uint")):
            return str(int(value))
    return number_text(value, digits)


def number_range_text(low: float, high: float) -> str:
    """``0‥999``, ``False‥True``, ``0.1‥0.10002``: never two equal ends (equal values: one)."""
    if low == high:
        return number_text(low)
    digits = distinct_digits((low, high))
    return f"{number_text(low, digits)}‥{number_text(high, digits)}"


SPARK_BARS = "▁▂▃▄▅▆▇█"


def sparkline(history: Sequence[float], width: int = 8) -> str:
    """``█▅▃▂▁▁▁▁``: values over the run, resampled to ``width`` bars (bucket means), scaled
    from their min to their max; NaN/Inf as ``·``. Empty when there is nothing to draw."""
    finite = [v for v in history if math.isfinite(v)]
    if len(history) < 2 or not finite:
        return ""
    low, high = min(finite), max(finite)
    count = min(width, len(history))
    bars = []
    for index in range(count):
        bucket = history[index * len(history) // count : (index + 1) * len(history) // count]
        values = [v for v in bucket if math.isfinite(v)]
        if len(values) < len(bucket) or not values:
            bars.append("·")
            continue
        mean = sum(values) / len(values)
        level = 0 if high == low else round((mean - low) / (high - low) * (len(SPARK_BARS) - 1))
        bars.append(SPARK_BARS[level])
    return "".join(bars)


def dtype_text(dtype: str | None, *, short: bool = True) -> str:
    """``f32`` (or ``float32`` with ``short=False``); empty when unknown."""
    if dtype is None:
        return ""
    return DTYPE_ABBREVIATIONS.get(dtype, dtype) if short else dtype


def device_text(device: str | None) -> str:
    return device or ""


def metadata_text(
    shape: Sequence[int] | None,
    dtype: str | None,
    device: str | None,
    *,
    python: bool = False,
    short: bool = False,
) -> str:
    """``(4, 1) float32 cpu``: a tensor's shape, dtype and device in one phrase."""
    parts = [shape_text(shape, python=python), dtype_text(dtype, short=short), device_text(device)]
    return " ".join(p for p in parts if p)


def sharded_text(
    placements: str, local_shapes: Sequence[tuple[int | None, Sequence[int] | None]]
) -> str:
    """A sharded tensor's layout after its global shape: ``Shard(0) → (32,32) per rank``,
    or each rank's shard where they differ (``Shard(0) → (32,32) r0 | (31,32) r1``).
    ``local_shapes``: (rank, its shard), rank None for a single process."""
    distinct = {tuple(shape) if shape is not None else None for _, shape in local_shapes}
    if len(distinct) <= 1:
        shape = next(iter(distinct), None)
        if "Shard" not in placements:  # replicated: each rank holds it whole
            return placements
        return f"{placements} → {shape_text(shape)} per rank"
    return f"{placements} → " + " | ".join(
        f"{shape_text(shape)} r{rank}" for rank, shape in local_shapes
    )
