"""A GPU memory budget: a size (``24GiB``, ``80GB``, ``512MiB``) or a named card.

The cards are what their makers sell as the device's memory (``a100-80gb``: 80 GB =
80·10⁹ bytes; the usable share is a little less: the CUDA context takes a few hundred MB).
"""

from __future__ import annotations

from shapelens.lazy_regex import LazyPattern

_UNITS = {
    "": 1,
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
}
GPUS: dict[str, int] = {
    "a100-40gb": 40 * 10**9,
    "a100-80gb": 80 * 10**9,
    "h100-80gb": 80 * 10**9,
    "h200": 141 * 10**9,
    "l4": 24 * 10**9,
    "l40s": 48 * 10**9,
    "a10g": 24 * 10**9,
    "t4": 16 * 10**9,
    "v100-16gb": 16 * 10**9,
    "v100-32gb": 32 * 10**9,
    "rtx-3090": 24 * 10**9,
    "rtx-4090": 24 * 10**9,
    "rtx-4060": 8 * 10**9,
}
"""Named cards and their memory in bytes (``--gpu``, ``shapelens.gpu``)."""
_SIZE = LazyPattern(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$")


class BudgetError(ValueError):
    """A size or card name that is not one (the message says what is accepted)."""


def parse_size(text: str) -> int:
    """``"24GiB"`` → 25769803776 bytes."""
    found = _SIZE.match(text)
    unit = found[2].lower() if found else None
    if found is None or unit not in _UNITS:
        raise BudgetError(f"{text!r} is not a size: write it as 24GiB, 80GB or 512MiB")
    return int(float(found[1]) * _UNITS[unit])


def budget_bytes(size: str | None, gpu: str | None) -> int | None:
    """The budget a run was given: the size when both are set."""
    if size:
        return parse_size(size)
    if gpu:
        try:
            return GPUS[gpu.lower()]
        except KeyError:
            known = ", ".join(GPUS)
            raise BudgetError(f"unknown GPU {gpu!r}: one of {known}; or a size") from None
    return None
