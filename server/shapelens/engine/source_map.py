"""Static facts about a source file, computed once per file from its AST.

The tracer needs to know, for every line a line event can report, which *statement* it
belongs to (multi-line statements fire several line events), the ``def`` line of each
function (``co_firstlineno`` is the first decorator's line), and which elementwise
expressions a statement contains (for the broadcast finding).
"""

from __future__ import annotations

import ast
import linecache
from dataclasses import dataclass, field
from typing import Any

# A tiny expression tree the broadcast check evaluates with operand shapes:
#   ("name", path)            path: ("y",) or ("self", "bias")
#   ("scalar",)               a numeric literal
#   ("op", symbol, text, left, right)
Expr = tuple[Any, ...]

_ELEMENTWISE_OPS: dict[type[ast.operator], str] = {
    ast.Add: "+",
    ast.Sub: "-",
    ast.Mult: "*",
    ast.Div: "/",
    ast.FloorDiv: "//",
    ast.Mod: "%",
    ast.Pow: "**",
    ast.BitAnd: "&",
    ast.BitOr: "|",
    ast.BitXor: "^",
}
_COMPOUND: tuple[type[ast.stmt], ...] = (
    ast.If,
    ast.For,
    ast.AsyncFor,
    ast.While,
    ast.With,
    ast.AsyncWith,
    ast.Try,
    ast.FunctionDef,
    ast.AsyncFunctionDef,
    ast.ClassDef,
    ast.Match,
)
_NESTED_SCOPES = (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
if hasattr(ast, "TryStar"):
    _COMPOUND = (*_COMPOUND, ast.TryStar)


@dataclass(frozen=True, kw_only=True)
class SourceMap:
    path: str
    lines: tuple[str, ...]
    statement_of: dict[int, int] = field(default_factory=dict)
    def_line_of: dict[int, int] = field(default_factory=dict)
    elementwise: dict[int, tuple[Expr, ...]] = field(default_factory=dict)
    statements: dict[int, ast.AST] = field(default_factory=dict)

    def text(self, line: int) -> str:
        return self.lines[line - 1].rstrip("\n") if 0 < line <= len(self.lines) else ""


def _header_end(node: ast.stmt) -> int:
    body = getattr(node, "body", None)
    if body and isinstance(body, list) and body[0].lineno > node.lineno:
        return int(body[0].lineno) - 1
    return int(node.lineno)


def _path_of(node: ast.expr) -> tuple[str, ...] | None:
    """``y`` → ("y",); ``self.fc.bias`` → ("self", "fc", "bias"); anything else → None."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return tuple(reversed(parts))
    return None


def _to_expr(node: ast.expr, source: str) -> Expr | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float, complex)):
        return ("scalar",)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd, ast.Invert)):
        return _to_expr(node.operand, source)
    path = _path_of(node)
    if path is not None:
        return ("name", path)
    if isinstance(node, ast.BinOp) and type(node.op) in _ELEMENTWISE_OPS:
        left = _to_expr(node.left, source)
        right = _to_expr(node.right, source)
        if left is None or right is None:
            return None
        text = ast.get_source_segment(source, node) or _ELEMENTWISE_OPS[type(node.op)]
        return ("op", _ELEMENTWISE_OPS[type(node.op)], " ".join(text.split()), left, right)
    return None


def _operand_count(expr: Expr) -> int:
    """Non-literal leaves: a broadcast needs at least two arrays."""
    if expr[0] == "op":
        return _operand_count(expr[3]) + _operand_count(expr[4])
    return 1 if expr[0] == "name" else 0


def _elementwise_candidates(stmt: ast.stmt, source: str) -> tuple[Expr, ...]:
    """Largest fully-understood elementwise sub-expressions of one statement."""
    found: list[Expr] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, _NESTED_SCOPES) or (node is not stmt and isinstance(node, ast.stmt)):
            return
        if isinstance(node, ast.BinOp) and type(node.op) in _ELEMENTWISE_OPS:
            expr = _to_expr(node, source)
            if expr is not None:
                if _operand_count(expr) >= 2:
                    found.append(expr)
                return
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(stmt)
    return tuple(found)


def build_source_map(path: str, source: str) -> SourceMap:
    lines = tuple(source.splitlines(keepends=True))
    try:
        tree = ast.parse(source, filename=path)
    except (SyntaxError, ValueError):
        return SourceMap(path=path, lines=lines)
    statement_of: dict[int, int] = {}
    def_line_of: dict[int, int] = {}
    elementwise: dict[int, tuple[Expr, ...]] = {}
    statements: dict[int, ast.AST] = {}
    # ast.walk visits parents before children, so inner statements win shared lines.
    for node in ast.walk(tree):
        if isinstance(node, ast.ExceptHandler):
            statement_of[node.lineno] = node.lineno
            continue
        if not isinstance(node, ast.stmt):
            continue
        start = int(node.lineno)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            first = min([int(d.lineno) for d in node.decorator_list] + [start])
            def_line_of[first] = start
            for line in range(first, _header_end(node) + 1):
                statement_of[line] = start
        elif isinstance(node, _COMPOUND):
            for line in range(start, _header_end(node) + 1):
                statement_of[line] = start
        else:
            for line in range(start, int(node.end_lineno or start) + 1):
                statement_of[line] = start
            candidates = _elementwise_candidates(node, source)
            if candidates:
                elementwise[start] = elementwise.get(start, ()) + candidates
        statements.setdefault(start, node)
    return SourceMap(
        path=path,
        lines=lines,
        statement_of=statement_of,
        def_line_of=def_line_of,
        elementwise=elementwise,
        statements=statements,
    )


class SourceMaps:
    """Caches one :class:`SourceMap` per file path."""

    def __init__(self) -> None:
        self._maps: dict[str, SourceMap] = {}

    def get(self, path: str) -> SourceMap:
        found = self._maps.get(path)
        if found is None:
            source = "".join(linecache.getlines(path))
            found = self._maps[path] = build_source_map(path, source)
        return found

    def put(self, path: str, source: str) -> SourceMap:
        found = self._maps[path] = build_source_map(path, source)
        return found
