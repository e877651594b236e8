"""The shape comments a program's author wrote, read from its source: ``# (B, nh, T, hs)``,
``# (B, T, C) @ (B, C, T) -> (B, T, T)``, ``# token embeddings of shape (b, t, n_embd)``,
``# x: [batch, seq, dim]``, or such a comment alone on the line above a statement.

Only comments that are clearly a shape are taken: the shape starts the comment (after an
optional ``name:``), or follows the word ``shape`` (or starts with ``size``/``of size``), or
an arrow; each dim is a name, a number, ``...``/``*``/``*name`` (any dims) or simple
arithmetic of those (``C // nh``, ``2N``, ``T+1``). Prose in parentheses (``# (see paper)``,
``# note: using list [-1] to ...``) is not a shape. Standard library only: the child parses
these in the user's interpreter.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from dataclasses import dataclass

REST = "..."
"""A dim spec that stands for any number of dims (``...``, ``*``, ``*batch``)."""


@dataclass(frozen=True)
class Dim:
    """One dim of a written shape: ``text`` as written, and what it means."""

    text: str
    size: int | None = None
    """A literal size."""
    name: str | None = None
    """A plain name (``B``) or attribute path (``self.n_head``)."""
    expr: ast.expr | None = None
    """Arithmetic of names and numbers (``C // nh``): checked once its names are known."""
    rest: bool = False
    """Any number of dims (``...``)."""


@dataclass(frozen=True)
class WrittenShape:
    dims: tuple[Dim, ...]
    text: str
    """As written, brackets included."""
    start: int
    """Column of its opening bracket in the source line."""
    end: int
    """Column past its closing bracket."""


@dataclass(frozen=True)
class ShapeComment:
    """A shape comment and the statement it is about."""

    line: int
    """The line the comment is on (the statement's line, or the line above it)."""
    text: str
    """The comment as written, from its ``#``."""
    column: int
    """Column of the ``#``."""
    result: WrittenShape
    """The shape of what the statement stores (the last of a ``->`` chain)."""
    inputs: tuple[WrittenShape, ...] = ()
    """The shapes before the arrow of a chain, in order (``(B, T, C) @ (B, C, T) -> ...``)."""
    target: str | None = None
    """``# x: (B, T)``: the name the shape is about."""
    prose: bool = False
    """Words follow the shape (``# (S, N, N) summed over the widths``): they may say it is
    the shape of a part of the statement, so a different number of dims is no finding."""


_KEYWORD = re.compile(r"(?:\bshape[sd]?\b|\bsize\b|\bdims\b)\s*(?:is|of|:|=)?\s*$", re.IGNORECASE)
"""Words after which a bracket is a shape: ``of shape (b, t)``, ``shape: [N, C]``."""
_PROSE_SIZE = re.compile(r"\bsize\b", re.IGNORECASE)
_ARROW = re.compile(r"\s*(?:->|=>|→)\s*")
_BETWEEN = re.compile(r"\s*(?:->|=>|→|@|x|×|\*|\+|-|/)\s*")
_TARGET = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*:\s*")
_IMPLICIT_PRODUCT = re.compile(r"\b(\d+)([A-Za-z_])")
_OPEN = {"(": ")", "[": "]"}
_NOT_TARGETS = frozenset({"shape", "shapes", "size", "sizes", "dims"})
_ANOTHER_SHAPE = re.compile(r"[(\[][^()\[\]]*,[^()\[\]]*[)\]]")


def parse_comment(comment: str, column: int = 0, line: int = 0) -> ShapeComment | None:
    """``comment`` (from its ``#``) read as a shape comment, or None when it is not one."""
    body = comment.lstrip("#")
    offset = column + len(comment) - len(body)
    body = body.split("#", 1)[0]  # a second comment after the shape is not prose
    stripped = body.lstrip()
    offset += len(body) - len(stripped)
    target = None
    named = _TARGET.match(stripped)
    if (
        named is not None
        and stripped[named.end() : named.end() + 1] in _OPEN
        and named.group(1).lower() not in _NOT_TARGETS  # "# Shape: (B, T, C)" names no variable
    ):
        target = named.group(1)
        offset += named.end()
        stripped = stripped[named.end() :]
    for start in _starts(stripped):
        chain = _chain(stripped, start, keyword=start > 0)
        if chain is not None:
            shapes, arrowed, prose = chain
            moved = [
                WrittenShape(dims=s.dims, text=s.text, start=s.start + offset, end=s.end + offset)
                for s in shapes
            ]
            if len(moved) > 1 and not arrowed:
                return None  # two shapes without an arrow: which is which is not said
            return ShapeComment(
                line=line, text=comment.rstrip(), column=column, result=moved[-1],
                inputs=tuple(moved[:-1]), target=target, prose=prose,
            )  # fmt: skip
    return None


def _starts(text: str) -> list[int]:
    """Where a shape may start: the comment's first character, after a shape keyword, or
    after a leading arrow."""
    starts = [0]
    if text.startswith(("->", "=>", "→")):
        arrow = _ARROW.match(text)
        starts = [arrow.end()] if arrow is not None else []
    for index, char in enumerate(text):
        if char in _OPEN and index > 0 and _KEYWORD.search(text[:index]):
            before = text[:index]
            if _PROSE_SIZE.search(before) and not re.match(r"\s*(of\s+)?size\b", before, re.I):
                continue  # "kernel size (3, 3)" names another thing's size
            starts.append(index)
    return starts


def _chain(text: str, start: int, *, keyword: bool) -> tuple[list[WrittenShape], bool, bool] | None:
    """The shapes of a chain starting at ``start``, whether it had an arrow, and whether
    prose follows it."""
    shapes: list[WrittenShape] = []
    arrowed = False
    index = start
    while True:
        if index >= len(text) or text[index] not in _OPEN:
            return None
        close = _closing(text, index)
        if close is None:
            return None
        dims = _dims(text[index + 1 : close], single_ok=keyword or arrowed or bool(shapes))
        if dims is None:
            return None
        shapes.append(
            WrittenShape(dims=dims, text=text[index : close + 1], start=index, end=close + 1)
        )
        index = close + 1
        between = _BETWEEN.match(text, index)
        if between is None or between.end() >= len(text) or text[between.end()] not in _OPEN:
            break
        arrowed = arrowed or bool(_ARROW.fullmatch(text[index : between.end()]))
        index = between.end()
    rest = text[index:]
    if rest and not re.match(r"[\s:;,.]", rest):
        return None  # "(B, T)foo": not a shape followed by prose
    if _ANOTHER_SHAPE.search(rest):
        return None  # "(a, b) and (c, d)": which one is the statement's is not said
    return shapes, arrowed, bool(rest.strip(" \t:;,."))


def _closing(text: str, index: int) -> int | None:
    want = [_OPEN[text[index]]]
    for position in range(index + 1, len(text)):
        char = text[position]
        if char in _OPEN:
            want.append(_OPEN[char])
        elif char in (")", "]"):
            if char != want.pop():
                return None
            if not want:
                return position
    return None


def _dims(inside: str, *, single_ok: bool) -> tuple[Dim, ...] | None:
    parts = [p.strip() for p in _split(inside)]
    trailing_comma = len(parts) > 1 and parts[-1] == ""
    if trailing_comma:
        parts = parts[:-1]
    if not parts or any(not p for p in parts):
        return None
    if len(parts) == 1 and not (single_ok or trailing_comma):
        return None  # "(optional)", "(t)" without "shape" before it: prose, most likely
    dims = [_dim(p) for p in parts]
    if any(d is None for d in dims) or sum(d.rest for d in dims if d is not None) > 1:
        return None
    found = tuple(d for d in dims if d is not None)
    if all(d.size is not None for d in found) and len(found) == 1 and not single_ok:
        return None
    return found


def _split(inside: str) -> list[str]:
    parts, depth, current = [], 0, ""
    for char in inside:
        if char in "([":
            depth += 1
        elif char in ")]":
            depth -= 1
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    parts.append(current)
    return parts


def _dim(text: str) -> Dim | None:
    if text in ("...", "*", "…") or re.fullmatch(r"\*[A-Za-z_]\w*", text):
        return Dim(text=text, rest=True)
    try:
        node = ast.parse(_IMPLICIT_PRODUCT.sub(r"\1*\2", text), mode="eval").body
    except SyntaxError:
        return None
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return Dim(text=text, size=node.value)
    path = _path(node)
    if path is not None:
        return Dim(text=text, name=path)
    if _arithmetic(node):
        return Dim(text=text, expr=node)
    return None


def _path(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = _path(node.value)
        return None if inner is None else f"{inner}.{node.attr}"
    return None


_OPERATORS = (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.Div)


def _arithmetic(node: ast.expr) -> bool:
    if isinstance(node, ast.Constant):
        return type(node.value) is int
    if _path(node) is not None:
        return True
    if isinstance(node, ast.BinOp) and isinstance(node.op, _OPERATORS):
        return _arithmetic(node.left) and _arithmetic(node.right)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return _arithmetic(node.operand)
    return False


def names_in(node: ast.expr) -> list[str]:
    """The names and attribute paths an arithmetic dim uses, outermost first."""
    path = _path(node)
    if path is not None:
        return [path]
    if isinstance(node, ast.BinOp):
        return names_in(node.left) + names_in(node.right)
    if isinstance(node, ast.UnaryOp):
        return names_in(node.operand)
    return []


def evaluate(node: ast.expr, sizes: dict[str, int]) -> float | None:
    """An arithmetic dim's value with ``sizes`` for its names; None when one is unknown."""
    path = _path(node)
    if path is not None:
        return sizes.get(path)
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.UnaryOp):
        inner = evaluate(node.operand, sizes)
        return None if inner is None else -inner
    if isinstance(node, ast.BinOp):
        left, right = evaluate(node.left, sizes), evaluate(node.right, sizes)
        if left is None or right is None:
            return None
        if isinstance(node.op, ast.Add):
            return left + right
        if isinstance(node.op, ast.Sub):
            return left - right
        if isinstance(node.op, ast.Mult):
            return left * right
        if right == 0:
            return None
        return left // right if isinstance(node.op, ast.FloorDiv) else left / right
    return None


def shape_comments(
    lines: tuple[str, ...], statement_of: dict[int, int], definitions: frozenset[int]
) -> dict[int, ShapeComment]:
    """Statement line → the shape comment about it: on its first or last line, or alone on
    the line right above a simple statement. A comment on a middle line of a long
    statement is about that part of it, and one above a ``def`` about the function."""
    found: dict[int, ShapeComment] = {}
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO("".join(lines)).readline))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return found
    for token in tokens:
        if token.type != tokenize.COMMENT:
            continue
        line, column = token.start
        comment = parse_comment(token.string, column, line)
        if comment is None:
            continue
        if not lines[line - 1][:column].strip():  # alone on its line
            statement = statement_of.get(line + 1)
            if statement != line + 1 or statement in definitions:
                continue
        else:
            statement = statement_of.get(line)
            last = statement_of.get(line + 1) != statement
            if statement is None or (line != statement and not last):
                continue
        found.setdefault(statement, comment)
    return found
