"""What a run's memory report says (shape-only, or real with ``--memory``): the summary's
lines, a line's figures (the hover), the ``out_of_memory`` sentence. Rounded here, from the
trace's exact numbers."""

from __future__ import annotations

import os

from shapelens.present.amounts import breakdown_text, format_bytes, format_flops
from shapelens.trace.model import DevicePeak, LineCost, MemoryFacts, MemoryReport


def memory_summary(report: MemoryReport, cwd: str) -> list[str]:
    """One line per device that held tensors, the GPU first, then the FLOPs:
    ``peak 12.3 MiB on cuda:0 at train.py:12, in the backward of transformer.h.11 (Block)
    (activations 4.1 MiB, ...); 51% of the 24.0 GiB budget``."""
    lines = [
        _peak_line(peak, report.budget_bytes, cwd)
        for peak in sorted(
            report.devices, key=lambda p: (p.device.startswith("cpu"), p.device, p.rank or 0)
        )
        if peak.peak_bytes
    ]
    if report.flops:
        lines.append(f"compute: {format_flops(report.flops)} in all")
    return lines


def _peak_line(peak: DevicePeak, budget: int | None, cwd: str) -> str:
    where = f" at {_place(peak.file, peak.line, cwd)}" if peak.file else ""
    device = peak.device if peak.rank is None else f"{peak.device} of rank {peak.rank}"
    text = f"memory: peak {format_bytes(peak.peak_bytes)} on {device}{where}"
    if peak.module is not None and peak.phase is not None:
        name = f"{peak.module} ({peak.module_class})" if peak.module else peak.module_class
        text += f", in the {peak.phase} of {name}"
    parts = breakdown_text(peak.breakdown)
    if parts:
        text += f" ({parts})"
    if budget and not peak.device.startswith("cpu"):
        text += f"; {peak.peak_bytes / budget:.0%} of the {format_bytes(budget)} budget"
    return text


def peak_status(report: MemoryReport, cwd: str) -> dict[str, str] | None:
    """For a status bar: the run's peak on its GPU (else its largest device), short, and the
    summary's lines in full."""
    devices = [d for d in report.devices if d.peak_bytes]
    if not devices:
        return None
    peak = min(devices, key=lambda d: (d.device.startswith("cpu"), -d.peak_bytes))
    short = f"peak {format_bytes(peak.peak_bytes)}"
    if report.budget_bytes and not peak.device.startswith("cpu"):
        short += f" ({peak.peak_bytes / report.budget_bytes:.0%})"
    return {"peak": short, "text": "\n".join(memory_summary(report, cwd))}


def line_figures(cost: LineCost) -> str:
    """``born 4.1 MiB, live after 8.3 MiB (peak 12.3 MiB) on cuda:0, 69.7 MFLOP``."""
    text = f"born {format_bytes(cost.born_bytes)}, live after {format_bytes(cost.live_after)}"
    if cost.peak_bytes > cost.live_after:
        text += f" (peak {format_bytes(cost.peak_bytes)})"
    text += f" on {cost.device}"
    if cost.flops:
        text += f", {format_flops(cost.flops)}"
    return text


def out_of_memory_sentence(memory: MemoryFacts) -> str:
    live = format_bytes(memory.live_bytes)
    budget = format_bytes(memory.budget_bytes)
    parts = breakdown_text(memory.breakdown)
    return f"{memory.device} would run out here: {live} live, over its {budget} ({parts})"


def _place(file: str | None, line: int | None, cwd: str) -> str:
    if file is None:
        return "?"
    name = os.path.relpath(file, cwd) if file.startswith(cwd + os.sep) else os.path.basename(file)
    return f"{name}:{line}"
