"""Markdown details of a traced variable (hover and inlay-hint tooltips)."""

from __future__ import annotations

from shapelens.present.shapes import shape_text
from shapelens.trace import TracedVar


def var_table(var: TracedVar, *, born: str | None = None) -> str:
    rows = [
        ("shape", shape_text(var.shape)),
        ("dtype", var.dtype or "—"),
        ("device", var.device or "—"),
        ("requires_grad", "—" if var.requires_grad is None else str(var.requires_grad)),
    ]
    if var.grad_fn:
        rows.append(("grad_fn", var.grad_fn))
    rows.append(("hits", str(var.hits)))
    if var.shape_varies:
        rows.append(("shapes seen", ", ".join(shape_text(s) for s in var.shapes)))
    for rank in var.ranks:  # distributed runs: each rank's own value
        rows.append(
            (
                f"rank {rank.rank}",
                f"{shape_text(rank.shape)} {rank.dtype} {rank.device} ×{rank.hits}",
            )
        )
    body = "\n".join(f"| {key} | `{value}` |" for key, value in rows)
    if born:  # already markdown (it quotes the source line as code)
        body += f"\n| born | {born} |"
    return f"**{var.name}** · `{var.type}`\n\n| | |\n|---|---|\n{body}"
