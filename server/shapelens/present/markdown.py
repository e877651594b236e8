"""Markdown details of a traced variable (hover and inlay-hint tooltips)."""

from __future__ import annotations

from collections.abc import Sequence

from shapelens.present.shapes import (
    distinct_digits,
    number_text,
    ranged_shape_text,
    scalar_text,
    shape_text,
    sparkline,
)
from shapelens.trace import TracedVar

SAMPLED_NOTE = (
    "_Hits estimated: once this line's values had stayed the same for its first hits, its"
    " line events were switched off (and re-armed now and then to read the values again);"
    " its count is extrapolated from its loop's header or its function's calls, which are"
    " counted exactly (with `--sample N`, a lower bound)._"
)


SIMULATED_NOTE = (
    "*A shape-only run has no values: where the program reads one (`.item()`, `float()`, "
    "`if` on a tensor, printing it) it stands in 0.5 for a float, 1 for an integer and True "
    "for a bool (False for a NaN/Inf test), so the program goes on as it ordinarily would. "
    "Not a real value.*"
)
BOUNDED_NOTE = (
    "*`≤`: this size depends on the data (a boolean mask's selection, `nonzero`, `unique`); "
    "a shape-only run continues at its bound (every element selected) and counts memory there.*"
)


def hits_text(hits: int, sampled: bool) -> str:
    """``×20000``, or ``×20000+`` when the count is an estimate (sampled line events)."""
    return f"×{hits}" + ("+" if sampled else "")


def var_table(
    var: TracedVar,
    *,
    born: str | None = None,
    sampled: bool = False,
    dims: Sequence[str | None] | None = None,
) -> str:
    """The details of ``var``; ``dims``: the name each dim came from (``B``, ``T``, …)."""
    if var.simulated:
        rows = [("value", "simulated"), ("hits", f"≈{var.hits}" if sampled else str(var.hits))]
        return _table(var, rows, born, sampled) + f"\n\n{SIMULATED_NOTE}"
    if var.number is not None:
        digits = distinct_digits(var.number)  # min and max never read the same
        last, low, high = (number_text(v, digits) for v in var.number)
        rows = [("last", last), ("min", low), ("max", high)]
        rows.append(("hits", f"≈{var.hits}" if sampled else str(var.hits)))
        return _table(var, rows + _course(var), born, sampled)
    named = dims is not None and var.shape is not None and len(dims) == len(var.shape)
    names = dims if named else None
    bounded = var.bounded_dims
    rows = [("shape", shape_text(var.shape, python=named, names=names, bounded=bounded))]
    if var.placements is not None:  # a DTensor: the global shape, laid out over the ranks
        rows = [("global shape", rows[0][1]), ("placements", var.placements)]
        if var.local_shape is not None and not var.ranks:
            rows.append(("shard", shape_text(var.local_shape)))
    if var.shape_varies:
        rows = [("last shape", shape_text(var.shape, bounded=bounded))]
        if var.dim_ranges is not None:
            dims_text = ranged_shape_text(
                var.dim_ranges, python=named, names=names, bounded=bounded
            )
            rows.append(("dims", dims_text))
    rows += [
        ("dtype", var.dtype or "—"),
        ("device", var.device or "—"),
        ("requires_grad", _grad_text(var)),
    ]
    if var.grad_fn:
        rows.append(("grad_fn", var.grad_fn))
    rows.append(("hits", f"≈{var.hits}" if sampled else str(var.hits)))
    if var.shape_varies:
        rows.append(_shapes_seen(var, sampled))
    for rank in var.ranks:  # distributed runs: each rank's own value
        shard = "" if rank.local_shape is None else f", shard {shape_text(rank.local_shape)}"
        rows.append(
            (
                f"rank {rank.rank}",
                f"{shape_text(rank.shape)} {rank.dtype} {rank.device} ×{rank.hits}{shard}",
            )
        )
    table = _table(var, rows + _course(var), born, sampled)
    return table + f"\n\n{BOUNDED_NOTE}" if bounded else table


def simulated_line_text(values: int, decisions: int) -> str:
    """A line's stand-ins in a shape-only run, for its hover."""
    parts = []
    if values:
        parts.append(f"{values} value{'s' if values != 1 else ''} read")
    if decisions:
        parts.append(f"{decisions} decision{'s' if decisions != 1 else ''} taken on them")
    return f"**simulated** on this line: {' and '.join(parts)}. {SIMULATED_NOTE}"


def _grad_text(var: TracedVar) -> str:
    if var.requires_grad is None:
        return "—"
    if var.grad_varied:  # e.g. a forward run in training and under no_grad
        return f"True on some hits, False on others (last: {var.requires_grad})"
    return str(var.requires_grad)


def _shapes_seen(var: TracedVar, sampled: bool) -> tuple[str, str]:
    """Every distinct shape (the first 8) with its hits: ``(8,32) ×30, (5,32) ×1``."""
    approx = "≈" if sampled else ""
    counts = var.shape_hits if len(var.shape_hits) == len(var.shapes) else ()
    seen = ", ".join(
        shape_text(shape) + (f" ×{approx}{counts[i]}" if counts else "")
        for i, shape in enumerate(var.shapes)
    )
    counted = sum(counts)
    if counts and counted < var.hits and len(var.shapes) >= 8:
        seen += f", others ×{approx}{var.hits - counted}"
    more = " (the first 8 distinct)" if len(var.shapes) >= 8 else ""
    return f"shapes seen{more}", seen


def _course(var: TracedVar) -> list[tuple[str, str]]:
    """A scalar's history: a larger sparkline, its first and last, its min and max."""
    history = var.history
    line = sparkline(history, width=32)
    if not line:
        return []
    ends = (history[0], history[-1], min(history), max(history))
    digits = distinct_digits(ends)  # first and last, min and max, never read the same
    first, last, low, high = (scalar_text(v, var.dtype, digits) for v in ends)
    return [
        ("course", line),
        ("first → last", f"{first} → {last}"),
        ("min ‥ max", f"{low} ‥ {high}"),
    ]


def _table(var: TracedVar, rows: list[tuple[str, str]], born: str | None, sampled: bool) -> str:
    body = "\n".join(f"| {key} | `{value}` |" for key, value in rows)
    if born:  # already markdown (it quotes the source line as code)
        body += f"\n| born | {born} |"
    note = f"\n\n{SAMPLED_NOTE}" if sampled else ""
    return f"**{var.name}** · `{var.type}`\n\n| | |\n|---|---|\n{body}{note}"
