"""Compact hint labels: ``pred (4,1) f32 cpu grad ×10``, ``seq (2,3)…(7,3) ×4``."""

from __future__ import annotations

from collections.abc import Sequence

from shapelens.trace import TracedLine, TracedVar

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


def shape_label(shape: Sequence[int] | None) -> str:
    if shape is None:
        return "(?)"
    if len(shape) == 1:
        return f"({shape[0]},)"
    return "(" + ",".join(str(d) for d in shape) + ")"


def dtype_label(dtype: str | None) -> str:
    if dtype is None:
        return ""
    return DTYPE_ABBREVIATIONS.get(dtype, dtype)


def _rank_label(var: TracedVar) -> str | None:
    """``x (8,3) r0 | (7,3) r1`` when ranks disagree; None when they agree."""
    distinct = {(r.shape, r.dtype, r.device) for r in var.ranks}
    if len(distinct) <= 1:
        return None
    parts = [f"{shape_label(r.shape)} r{r.rank}" for r in var.ranks]
    return f"{var.name} " + " | ".join(parts)


def var_label(var: TracedVar, sampled: bool = False) -> str:
    per_rank = _rank_label(var)
    if per_rank is not None:
        return per_rank
    if var.shape_varies:
        shapes = f"{shape_label(var.shapes[0])}…{shape_label(var.shape)}"
    else:
        shapes = shape_label(var.shape)
    parts = [var.name, shapes, dtype_label(var.dtype)]
    if var.device is not None:
        parts.append(var.device)
    if var.requires_grad:
        parts.append("grad")
    if var.hits > 1:
        parts.append(f"×{var.hits}" + ("+" if sampled else ""))
    return " ".join(p for p in parts if p)


def line_label(line: TracedLine, separator: str = "  ") -> str:
    return separator.join(var_label(v, line.sampled) for v in line.vars)
