"""Bytes and FLOPs as people read them, written in one place (the trace keeps exact
numbers: every surface rounds here)."""

from __future__ import annotations

from collections.abc import Iterable

_BINARY = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")
_DECIMAL = ("FLOP", "KFLOP", "MFLOP", "GFLOP", "TFLOP", "PFLOP", "EFLOP")


def _scaled(count: int, units: tuple[str, ...], step: int) -> str:
    """``count`` in the largest unit that keeps it under ``step``; whole in the first."""
    value = float(count)
    for index, unit in enumerate(units):
        if abs(value) < step or index == len(units) - 1:
            return f"{count} {unit}" if index == 0 else f"{value:.1f} {unit}"
        value /= step
    raise AssertionError("unreachable")


def format_bytes(count: int) -> str:
    """``12897444`` → ``12.3 MiB`` (binary units, as ``nvidia-smi`` and torch print)."""
    return _scaled(count, _BINARY, 1024)


def format_flops(count: int) -> str:
    """``276299776`` → ``276.3 MFLOP``."""
    return _scaled(count, _DECIMAL, 1000)


def breakdown_text(parts: Iterable[tuple[str, int]]) -> str:
    """``parameters 2.0 MiB, gradients 2.0 MiB, ...`` (largest first)."""
    ordered = sorted(((name, amount) for name, amount in parts if amount), key=lambda p: -p[1])
    return ", ".join(f"{name} {format_bytes(amount)}" for name, amount in ordered)
