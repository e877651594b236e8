"""Findings: likely bugs pointed at a line (broadcast, device/dtype mismatch, non-finite)."""

from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class FindingsConfig:
    broadcast: bool = True
    mismatch: bool = True
    nonfinite: bool = True
    warnings: bool = True
    """Library warnings (torch's "target size differs", ...) placed at the user's line."""
    nonfinite_max_elements: int = 1_000_000
    """Tensors with more elements are not scanned (the scan costs time proportional to size)."""
    nonfinite_on_gpu: bool = False
    """Scanning a GPU tensor synchronises the device: off unless the user opts in."""
