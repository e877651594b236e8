"""The module tree as text: a summary per module (code lens, the editor's tree) and the
table ``shapelens run --modules`` prints."""

from __future__ import annotations

from collections.abc import Sequence

from shapelens.present.amounts import format_bytes, format_flops
from shapelens.present.markdown import hits_text
from shapelens.present.shapes import dtype_text, ranged_shape_text, shape_text
from shapelens.trace.model import ModuleCall, TensorSlot


def count_text(count: int) -> str:
    """``3``, ``4.2k``, ``27.7k``, ``1.3M``, ``1.2B``: a parameter count at a glance."""
    for size, suffix in ((1_000_000_000, "B"), (1_000_000, "M"), (1_000, "k")):
        if count >= size:
            text = f"{count / size:.1f}".removesuffix(".0")
            return text + suffix
    return str(count)


def slot_shape_text(slot: TensorSlot) -> str:
    """``(1‥8,32,32)``: varying dims as ranges."""
    if slot.dim_ranges is not None:
        return ranged_shape_text(slot.dim_ranges)
    return shape_text(slot.shape)


def slot_text(slot: TensorSlot) -> str:
    """``(1‥8,32,32) f32 cpu``."""
    parts = [slot_shape_text(slot), dtype_text(slot.dtype), slot.device or ""]
    return " ".join(p for p in parts if p)


def shapes_text(slots: Sequence[TensorSlot], limit: int = 2) -> str:
    """The shapes of a module's inputs (or outputs): ``(8,32), (8,32)``; ``—`` for none."""
    if not slots:
        return "—"
    text = ", ".join(slot_shape_text(s) for s in slots[:limit])
    return text + (", …" if len(slots) > limit else "")


def module_summary(module: ModuleCall) -> str:
    """``4.2k params · (4,64,64) → (4,64,65) ×22``, and in a shape-only run what its forward
    keeps for the backward and its FLOPs: ``· 514.5 KiB activations · 68.4 MFLOP``."""
    flow = f"{shapes_text(module.inputs)} → {shapes_text(module.outputs)}"
    calls = calls_text(module.calls, module.calls_sampled)
    text = f"{count_text(module.params)} params · {flow} {calls}"
    cost = module.cost
    if cost is not None:
        text += f" · {format_bytes(cost.activation_bytes)} activations · {format_flops(cost.flops)}"
    return text


def calls_text(calls: int, sampled: bool) -> str:
    """``×400``, or ``×400+`` when partly estimated (as a sampled line's hits)."""
    return hits_text(calls, sampled)


def merged_summary(modules: Sequence[ModuleCall]) -> str:
    """One class's instances (``h.0``, ``h.1``): the first's parameters, every call, each
    shape's dims ranged over all instances."""
    first = modules[0]
    calls = calls_text(sum(m.calls for m in modules), any(m.calls_sampled for m in modules))
    inputs = _merged_slots([m.inputs for m in modules])
    outputs = _merged_slots([m.outputs for m in modules])
    flow = f"{shapes_text(inputs)} → {shapes_text(outputs)}"
    many = f" ({len(modules)} instances)" if len(modules) > 1 else ""
    return f"{count_text(first.params)} params · {flow} {calls}{many}"


def _merged_slots(per_module: Sequence[Sequence[TensorSlot]]) -> list[TensorSlot]:
    merged: list[TensorSlot] = []
    for index in range(min(len(slots) for slots in per_module)):
        slots = [s[index] for s in per_module]
        ranges = [_ranges(s) for s in slots]
        if any(r is None for r in ranges) or len({len(r or ()) for r in ranges}) != 1:
            merged.append(slots[-1])
            continue
        bounds = tuple(
            (min(r[d][0] for r in ranges if r), max(r[d][1] for r in ranges if r))
            for d in range(len(ranges[0] or ()))
        )
        varied = any(lo != hi for lo, hi in bounds)
        merged.append(
            TensorSlot(
                shape=slots[-1].shape,
                dim_ranges=bounds if varied else None,
                dtype=slots[-1].dtype,
                device=slots[-1].device,
            )
        )
    return merged


def _ranges(slot: TensorSlot) -> tuple[tuple[int, int], ...] | None:
    if slot.dim_ranges is not None:
        return slot.dim_ranges
    if slot.shape is None:
        return None
    return tuple((d, d) for d in slot.shape)


def modules_table(modules: Sequence[ModuleCall]) -> str:
    """The tree as a table: path (indented by depth), class, params, in → out, calls; a
    shape-only run adds each module's activations, forward and backward FLOPs, and a totals
    line."""
    costed = any(m.cost is not None for m in modules)
    rows: list[tuple[str, ...]] = [("module", "class", "params", "in → out", "calls")]
    if costed:
        rows = [(*rows[0], "activations", "forward FLOPs", "backward FLOPs")]
    depths: dict[str, int] = {}
    for module in modules:
        path = module.path
        if not path:
            depths = {"": 0}  # a new root
        # Under the nearest module that ran (a ModuleList is never called itself).
        parent = next((p for p in _prefixes(path) if p in depths), "")
        depth = depths[path] = depths.get(parent, 0) + 1 if path else 0
        name = path[len(parent) + 1 :] if parent else path or module.cls
        rank = f" [r{module.rank}]" if module.rank is not None else ""
        row: tuple[str, ...] = (
            "  " * depth + name + rank,
            module.cls,
            count_text(module.params)
            + (
                f" ({format_bytes(module.shard_bytes)}/rank)"
                if module.shard_bytes is not None
                else ""
            ),
            f"{shapes_text(module.inputs)} → {shapes_text(module.outputs)}",
            calls_text(module.calls, module.calls_sampled),
        )
        if costed:
            cost = module.cost
            row = (
                *row,
                "—" if cost is None else format_bytes(cost.activation_bytes),
                "—" if cost is None else format_flops(cost.flops),
                "—" if cost is None else format_flops(cost.backward_flops),
            )
        rows.append(row)
    last = len(rows[0]) - 1
    widths = [max(len(row[i]) for row in rows) for i in range(last)]
    table = "\n".join(
        "  ".join(c.ljust(widths[i]) if i < last else c for i, c in enumerate(row)).rstrip()
        for row in rows
    )
    return table + ("\n" + totals_text(modules) if costed else "")


def totals_text(modules: Sequence[ModuleCall]) -> str:
    """torchinfo's closing lines, for the roots: ``total: 535.6k params (535.6k trainable),
    2.0 MiB of parameters; a forward keeps 514.5 KiB for the backward, 68.4 MFLOP forward,
    69.7 MFLOP backward``."""
    roots = [m for m in modules if not m.path]
    params = sum(m.params for m in roots)
    trainable = sum(m.trainable_params for m in roots)
    costs = [m.cost for m in roots if m.cost is not None]
    text = f"total: {count_text(params)} params ({count_text(trainable)} trainable)"
    if costs:
        text += (
            f", {format_bytes(sum(c.param_bytes for c in costs))} of parameters; a forward "
            f"keeps {format_bytes(sum(c.activation_bytes for c in costs))} for the backward, "
            f"{format_flops(sum(c.flops for c in costs))} forward, "
            f"{format_flops(sum(c.backward_flops for c in costs))} backward"
        )
        grads = sum(c.grad_bytes for c in costs)
        state = sum(c.optimizer_state_bytes for c in costs)
        if grads or state:
            text += f"; gradients {format_bytes(grads)}, optimizer state {format_bytes(state)}"
    return text


def _prefixes(path: str) -> list[str]:
    """``a.b.c`` → ``a.b``, ``a`` (longest first)."""
    parts = path.split(".")
    return [".".join(parts[:n]) for n in range(len(parts) - 1, 0, -1)]
