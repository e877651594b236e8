"""Literal values read from source, the way the code that wrote them means them."""

from __future__ import annotations

import ast


def int_literal(node: ast.expr) -> int | None:
    """``2`` or ``-1`` written in the source; ``None`` for anything else (``True`` too: a
    bool is no index or dim, though Python counts it an int)."""
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = int_literal(node.operand)
        return None if inner is None else -inner
    return None
