"""The elementwise operators a broadcast can hide in, and the torch names that run them.

``a - b``, ``a.sub(b)`` and ``torch.sub(a, b)`` are one operator: the source map finds
each as a site, the op watch recognises the torch function it runs as that operator.
In-place forms (``add_``) are left out: they cannot grow their left operand.
"""

from __future__ import annotations

from typing import Final

OPERATOR_NAMES: Final[dict[str, tuple[str, ...]]] = {
    "+": ("add",),
    "-": ("sub", "subtract"),
    "*": ("mul", "multiply"),
    "/": ("div", "true_divide", "divide"),
    "//": ("floor_divide",),
    "%": ("remainder", "mod"),
    "**": ("pow",),
    "&": ("and", "bitwise_and"),
    "|": ("or", "bitwise_or"),
    "^": ("xor", "bitwise_xor"),
    "==": ("eq",),
    "!=": ("ne",),
    "<": ("lt",),
    "<=": ("le",),
    ">": ("gt",),
    ">=": ("ge",),
}

OPERATOR_OF_NAME: Final[dict[str, str]] = {
    name: symbol
    for symbol, names in OPERATOR_NAMES.items()
    for name in names
    if name not in ("and", "or", "xor")  # dunder halves only (``__and__``), never methods
}
"""``sub`` → ``-``: a method (``a.sub(b)``) or function (``torch.sub(a, b)``) of torch."""
