"""Where a ``def``'s annotations go, read from its tokens (the ast's columns count UTF-8
bytes, not characters), and the imports the annotations need."""

from __future__ import annotations

import ast
import tokenize
from collections.abc import Sequence
from dataclasses import dataclass

from shapelens.present.annotations import TextChange


@dataclass(frozen=True)
class Span:
    """Where an annotation goes: after ``start`` (a name, or the closing parenthesis), and
    the existing annotation's extent (``end`` == ``start`` when there is none)."""

    start: tuple[int, int]
    end: tuple[int, int]
    existing: bool
    tight_default: bool = False
    """An unannotated parameter's ``=`` follows it without spaces (``y=None``): annotated,
    it takes spaces around it (``y: T = None``)."""


@dataclass(frozen=True)
class Signature:
    params: dict[str, Span]
    returns: Span | None


def signature_places(tokens: Sequence[tokenize.TokenInfo], def_row: int) -> Signature | None:
    """The parameters' and the return annotation's places in ``def``'s tokens (1-based
    ``def_row``), read from tokens: the ast's columns count UTF-8 bytes, not characters."""
    significant = [t for t in tokens if t.type not in (tokenize.NL, tokenize.COMMENT)]
    start = next(
        (i for i, t in enumerate(significant) if t.start[0] == def_row and t.string == "def"),
        None,
    )
    if start is None or start + 2 >= len(significant) or significant[start + 2].string != "(":
        return None
    params: dict[str, Span] = {}
    depth = 0
    expecting = True
    index = start + 2
    while index < len(significant):
        token = significant[index]
        if token.string in "([{" and token.type == tokenize.OP:
            depth += 1
        elif token.string in ")]}" and token.type == tokenize.OP:
            depth -= 1
            if depth == 0:
                break
        elif depth == 1 and token.string == ",":
            expecting = True
        elif depth == 1 and expecting and token.type == tokenize.NAME:
            expecting = False
            end = token.end
            existing = significant[index + 1].string == ":"
            if existing:
                index += 2
                nested = 0
                while index < len(significant):  # the annotation: up to , = or ) at depth 1
                    inner = significant[index]
                    if inner.string in "([{":
                        nested += 1
                    elif inner.string in ")]}":
                        if nested == 0:
                            break
                        nested -= 1
                    elif nested == 0 and inner.string in (",", "="):
                        break
                    end = inner.end
                    index += 1
                params[token.string] = Span(token.end, end, True)
                continue
            following = significant[index + 1]
            tight = following.string == "=" and following.start == token.end
            if tight:
                end = following.end
            params[token.string] = Span(token.end, end, False, tight)
        index += 1
    if index >= len(significant):
        return None
    close = significant[index]
    after = index + 1
    if after < len(significant) and significant[after].string == "->":
        end = significant[after].end
        index = after + 1
        while index < len(significant) and significant[index].string != ":":
            end = significant[index].end
            index += 1
        return Signature(params, Span(close.end, end, True))
    return Signature(params, Span(close.end, close.end, False))


def annotate(span: Span, text: str, *, arrow: bool = False) -> TextChange:
    (line, column), (end_line, end_column) = span.start, span.end
    # the ``=`` of ``y=None`` is replaced, the value stays: ``y: T = None``
    text = (" -> " if arrow else ": ") + text + (" = " if span.tight_default else "")
    return TextChange(line - 1, column, end_line - 1, end_column, text)


def imports(tree: ast.Module, source: str, families: set[str]) -> list[TextChange]:
    """``from jaxtyping import Float`` and ``from torch import Tensor``, what of them the
    module does not import yet: added to its ``from jaxtyping import`` line, or after its
    leading imports (a ``__future__`` import stays first)."""
    bound: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                bound.add(alias.asname or alias.name.split(".")[0])
    rows = source.splitlines(keepends=True)
    changes: list[TextChange] = []
    lines: list[str] = []
    wanted = sorted(families - bound)
    merged = _merged_import(tree, rows, wanted) if wanted else None
    if merged is not None:
        changes.append(merged)
    elif wanted:
        lines.append(f"from jaxtyping import {', '.join(wanted)}\n")
    if "Tensor" not in bound:
        lines.append("from torch import Tensor\n")
    if not lines:
        return changes
    after = 0
    for index, node in enumerate(tree.body):
        docstring = (
            index == 0 and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
        )
        if isinstance(node, (ast.Import, ast.ImportFrom)) or docstring:
            after = node.end_lineno or node.lineno
        else:
            break
    text = "".join(lines)
    if after >= len(rows) and rows and not rows[-1].endswith("\n"):
        last = rows[-1].rstrip("\r\n")
        end = len(rows) - 1
        return [*changes, TextChange(end, len(last), end, len(last), "\n" + text)]
    return [*changes, TextChange(after, 0, after, 0, text)]


def _merged_import(
    tree: ast.Module, rows: Sequence[str], wanted: Sequence[str]
) -> TextChange | None:
    """``from jaxtyping import Float`` rewritten to import ``wanted`` too, where the module
    has that import on a line of its own, written as ``ast.unparse`` would."""
    for node in tree.body:
        if not (isinstance(node, ast.ImportFrom) and node.module == "jaxtyping" and not node.level):
            continue
        row = rows[node.lineno - 1].rstrip()
        if node.lineno != node.end_lineno or row.strip() != ast.unparse(node):
            continue
        names = sorted([ast.unparse(alias) for alias in node.names] + list(wanted))
        indent = len(row) - len(row.lstrip())
        return TextChange(
            node.lineno - 1, indent, node.lineno - 1, len(row),
            f"from jaxtyping import {', '.join(names)}",
        )  # fmt: skip
    return None
