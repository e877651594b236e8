"""Bytes and FLOPs as people read them, written in one place (the trace keeps exact
numbers: every surface rounds here)."""

from __future__ import annotations

from collections.abc import Iterable

_BINARY = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")
_DECIMAL = ("", "K", "M", "G", "T", "P", "E")


def format_bytes(count: int) -> str:
    """``12897444`` → ``12.3 MiB`` (binary units, as ``nvidia-smi`` and torch print)."""
    value = float(count)
    for unit in _BINARY:
        if abs(value) < 1024 or unit == _BINARY[-1]:
            return f"{count} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def format_flops(count: int) -> str:
    """``276299776`` → ``276.3 MFLOP``."""
    value = float(count)
    for unit in _DECIMAL:
        if abs(value) < 1000 or unit == _DECIMAL[-1]:
            return f"{count} FLOP" if unit == "" else f"{value:.1f} {unit}FLOP"
        value /= 1000
    raise AssertionError("unreachable")


def breakdown_text(parts: Iterable[tuple[str, int]]) -> str:
    """``parameters 2.0 MiB, gradients 2.0 MiB, ...`` (largest first)."""
    ordered = sorted(((name, amount) for name, amount in parts if amount), key=lambda p: -p[1])
    return ", ".join(f"{name} {format_bytes(amount)}" for name, amount in ordered)
