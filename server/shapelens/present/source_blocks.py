"""What a hint needs to know of the source around a line: the block that repeats it (the
``def`` or loop it runs in), the scope it runs in, the names it reads, and where its
statement ends.

Hints leave out what the enclosing block already says: a loop header shows ``×22`` once,
and a line in its body that ran as often shows no count (``present.labels``)."""

from __future__ import annotations

import ast
from collections.abc import Sequence
from dataclasses import dataclass, field

_LOOPS = (ast.For, ast.AsyncFor, ast.While)
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
_NO_CODE = (ast.Global, ast.Nonlocal, *_FUNCTIONS, ast.ClassDef, *_LOOPS)
"""Statements whose own line does not run once per pass through their block: no code, a
definition (its line also counts the calls), or a loop header (one event per iteration)."""


@dataclass(frozen=True, kw_only=True)
class Block:
    """A ``def`` or loop: what repeats the lines in it."""

    header: int
    """Its ``def``/``for``/``while`` line (0: the module, which runs once)."""
    is_function: bool
    counter: int | None
    """The line whose hits count the block's passes: a function's ``def`` line (one event
    per call), a loop's first plain statement (one per iteration); None when it has none."""


MODULE = Block(header=0, is_function=False, counter=None)


@dataclass(frozen=True, kw_only=True)
class SourceBlocks:
    """Per line (1-based) of one file."""

    enclosing: dict[int, Block] = field(default_factory=dict)
    """The innermost ``def`` or loop each line of a statement runs in."""
    opened: dict[int, Block] = field(default_factory=dict)
    """A ``def``/``for``/``while`` line: the block it opens."""
    scope: dict[int, int] = field(default_factory=dict)
    """The ``def`` line of the function each line runs in (0: module level); a ``def``
    line's arguments belong to the function it opens."""
    reads: dict[int, frozenset[str]] = field(default_factory=dict)
    """What each statement reads: names and attribute paths (``x``, ``self.weight``)."""
    owner: dict[int, int] = field(default_factory=dict)
    """The ``class`` line each line of a method runs under (0: none): ``self.bias`` of one
    class is not another's."""
    last_line: dict[int, int] = field(default_factory=dict)
    """The last line of each simple statement (not a ``def``, loop, ``if``, ...), by its
    first: a call spread over lines is read as one statement."""

    def block_of(self, line: int) -> Block:
        return self.enclosing.get(line, MODULE)


def source_blocks(source: str | Sequence[str]) -> SourceBlocks:
    """The blocks of ``source``; empty when it does not parse (hints then keep every count)."""
    text = source if isinstance(source, str) else "".join(source)
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return SourceBlocks()
    blocks = SourceBlocks()
    _visit(tree.body, MODULE, 0, 0, blocks)
    return blocks


def _visit(
    body: Sequence[ast.stmt],
    block: Block,
    scope: int,
    owner: int,
    blocks: SourceBlocks,
) -> None:
    for statement in body:
        end = statement.end_lineno or statement.lineno
        for line in range(statement.lineno, end + 1):
            blocks.enclosing[line] = block
            blocks.scope[line] = scope
            blocks.owner[line] = owner
        blocks.reads[statement.lineno] = _reads(statement)
        if isinstance(statement, _FUNCTIONS):
            opened = Block(header=statement.lineno, is_function=True, counter=statement.lineno)
            blocks.opened[statement.lineno] = opened
            blocks.scope[statement.lineno] = statement.lineno
            _visit(statement.body, opened, statement.lineno, owner, blocks)
        elif isinstance(statement, _LOOPS):
            opened = Block(
                header=statement.lineno, is_function=False, counter=_first_plain(statement.body)
            )
            blocks.opened[statement.lineno] = opened
            _visit(statement.body, opened, scope, owner, blocks)
            _visit(statement.orelse, block, scope, owner, blocks)
        elif isinstance(statement, ast.ClassDef):
            _visit(statement.body, block, scope, statement.lineno, blocks)
        else:
            children = _child_bodies(statement)
            for child in children:
                _visit(child, block, scope, owner, blocks)
            if not children:
                blocks.last_line[statement.lineno] = end


def _first_plain(body: Sequence[ast.stmt]) -> int | None:
    """The line of ``body``'s first statement when it runs once per pass (a nested loop's
    header runs once per inner iteration, a nested ``def`` also counts its calls)."""
    first = body[0] if body else None
    if isinstance(first, ast.Try):
        return _first_plain(first.body)
    if first is None or isinstance(first, _NO_CODE):
        return None
    return first.lineno


def _child_bodies(statement: ast.stmt) -> list[Sequence[ast.stmt]]:
    """The nested statement lists of an ``if``/``with``/``try``/``match``."""
    bodies: list[Sequence[ast.stmt]] = []
    for name in ("body", "orelse", "finalbody"):
        value = getattr(statement, name, None)
        if isinstance(value, list) and value and isinstance(value[0], ast.stmt):
            bodies.append(value)
    for handler in getattr(statement, "handlers", ()):
        bodies.append(handler.body)
    for case in getattr(statement, "cases", ()):
        bodies.append(case.body)
    return bodies


def _reads(statement: ast.stmt) -> frozenset[str]:
    """Names and attribute paths ``statement`` reads, not looking into nested bodies."""
    nodes: list[ast.AST]
    if isinstance(statement, (*_FUNCTIONS, ast.ClassDef)):
        return frozenset()
    if isinstance(statement, (ast.For, ast.AsyncFor)):
        nodes = [statement.iter]
    elif isinstance(statement, (ast.While, ast.If)):
        nodes = [statement.test]
    elif isinstance(statement, (ast.With, ast.AsyncWith)):
        nodes = [item.context_expr for item in statement.items]
    elif isinstance(statement, ast.Try):
        return frozenset()
    else:
        nodes = [statement]
    found: set[str] = set()
    for node in nodes:
        for child in ast.walk(node):
            if isinstance(child, ast.Name) and isinstance(child.ctx, ast.Load):
                found.add(child.id)
            elif isinstance(child, ast.Attribute) and isinstance(child.ctx, ast.Load):
                path = _attribute_path(child)
                if path is not None:
                    found.add(path)
    return frozenset(found)


def _attribute_path(node: ast.Attribute) -> str | None:
    parts = [node.attr]
    value = node.value
    while isinstance(value, ast.Attribute):
        parts.append(value.attr)
        value = value.value
    if not isinstance(value, ast.Name):
        return None
    parts.append(value.id)
    return ".".join(reversed(parts))
