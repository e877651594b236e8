"""Compact hint labels: ``pred (4,1) f32 cpu grad ×10``, ``seq (2‥7,3) ×4``,
``flat (4,)|(2,2) ×3``."""

from __future__ import annotations

from shapelens.present.markdown import hits_text
from shapelens.present.shapes import (
    alternatives_text,
    dtype_text,
    number_range_text,
    number_text,
    ranged_shape_text,
    shape_text,
    sparkline,
)
from shapelens.trace import TracedLine, TracedVar


def _rank_label(var: TracedVar) -> str | None:
    """``x (8,3) r0 | (7,3) r1`` when ranks disagree; None when they agree."""
    distinct = {(r.shape, r.dtype, r.device) for r in var.ranks}
    if len(distinct) <= 1:
        return None
    parts = [f"{shape_text(r.shape)} r{r.rank}" for r in var.ranks]
    return f"{var.name} " + " | ".join(parts)


def _number_label(var: TracedVar, number: tuple[float, float, float], sampled: bool) -> str:
    """``B=4``, or ``i 0‥999 ×1000`` when the values read varied."""
    last, low, high = number
    if low == high or low != low or high != high:  # constant (or NaN: no order to show)
        text = f"{var.name}={number_text(last)}"
    else:
        text = f"{var.name} {number_range_text(low, high)}"
    if isinstance(last, float) and (line := sparkline(var.history)):
        text += f" {line}"  # a float's course (a loss); a counter's ramp says nothing
    return text + (f" {hits_text(var.hits, sampled)}" if var.hits > 1 else "")


def var_label(var: TracedVar, sampled: bool = False) -> str:
    if var.number is not None:
        return _number_label(var, var.number, sampled)
    per_rank = _rank_label(var)
    if per_rank is not None:
        return per_rank
    if var.shape_varies and var.dim_ranges is not None:
        shapes = ranged_shape_text(var.dim_ranges)  # every varying dim as its range
    elif var.shape_varies:  # the number of dims varied: the distinct shapes themselves
        shapes = alternatives_text(var.shapes)
    else:
        shapes = shape_text(var.shape)
    parts = [var.name, shapes]
    if var.history and (line := sparkline(var.history)):
        parts[1:] = [number_text(var.history[-1]), line]  # a scalar (a loss): its course
    parts.append(dtype_text(var.dtype))
    if var.device is not None:
        parts.append(var.device)
    if var.requires_grad:
        parts.append("grad")
    if var.hits > 1:
        parts.append(hits_text(var.hits, sampled))
    return " ".join(p for p in parts if p)


def line_label(line: TracedLine, separator: str = "  ") -> str:
    return separator.join(var_label(v, line.sampled) for v in line.vars)
