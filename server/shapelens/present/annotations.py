"""Contracts written from a run, as text: a shape comment for a line that bound a tensor
(``# (B, n_head, T, C // n_head)``), and the edits that code actions make of it
(``present/signatures.py`` writes jaxtyping annotations the same way).

The shapes are the observed ones: a dim takes the name the code built it from where the
code says (``present/dim_names.py``), its size where it never varied, and otherwise what
the run saw, never a name the code does not bind."""

from __future__ import annotations

import ast
import io
import tokenize
from dataclasses import dataclass

from shapelens.present.dim_names import DimNames, dim_names
from shapelens.present.shapes import ranged_shape_text
from shapelens.trace import TracedLine, TracedVar


@dataclass(frozen=True)
class TextChange:
    """Replace ``[start, end)`` of the source by ``text``: 0-based lines, columns in
    characters (the editor converts them to its own units)."""

    line: int
    column: int
    end_line: int
    end_column: int
    text: str


# -- shape comments ---------------------------------------------------------------------------


def shape_comment(var: TracedVar, statement: str) -> str | None:
    """``# (B, n_head, T, C // n_head)``: ``var``'s shape as ``statement`` (the line that
    bound it) names its dims, sizes elsewhere; a dim that varied and has no name is written
    as the range seen (``3‥8``), so the comment states only what is known: a made-up name
    would read as a binding, and a shape-comment checker would hold the code to it. None
    when ``var`` is no tensor or its number of dims varied (no one shape to write)."""
    ranges = observed_ranges(var)
    if ranges is None:
        return None
    names = _statement_names(statement, var.name, len(ranges))
    return "# " + ranged_shape_text(ranges, python=True, names=names, sizes=False)


@dataclass(frozen=True)
class ShapeCommentEdit:
    comment: str
    """``# (B, T, C)``, or ``# k: (B, T, C)`` where the line bound tensors of other shapes."""
    change: TextChange


def shape_comment_edits(source: str, line: int, traced: TracedLine) -> list[ShapeCommentEdit]:
    """The shape comments line ``line`` (0-based) may get, each at its end: one for what it
    bound (``q, k, v = ...split(C, dim=2)``: one shape), or one per tensor where their shapes
    differ. None for a line that has a comment already, or is not one simple statement of
    its own (a ``def``, a statement continued on the next line, two statements)."""
    rows = source.splitlines()
    if not 0 <= line < len(rows):
        return []
    text = rows[line]
    shown = [
        (var.name, comment)
        for var in traced.vars
        if (comment := shape_comment(var, text)) is not None
    ]
    if not shown or not _lone_statement(source, line):  # no tensor: no need to parse
        return []
    if len({comment for _, comment in shown}) > 1:  # one comment each, naming its tensor
        shown = [
            (name, comment.replace("# ", f"# {name}: ", 1))
            for name, comment in shown
            if not name.startswith("<")
        ]
    end = len(text.rstrip())
    comments = dict.fromkeys(comment for _, comment in shown)
    return [
        ShapeCommentEdit(comment, TextChange(line, end, line, len(text), f"  {comment}"))
        for comment in comments
    ]


def _lone_statement(source: str, line: int) -> bool:
    """Line ``line`` (0-based) holds exactly one simple statement, whole, and no comment."""
    tree = parse_source(source)
    if tree is None:
        return False
    starting = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.stmt) and node.lineno - 1 <= line <= (node.end_lineno or 0) - 1
        and not hasattr(node, "body")
    ]  # fmt: skip
    if len(starting) != 1:
        return False
    statement = starting[0]
    if statement.lineno != statement.end_lineno:
        return False
    try:
        tokens = tokenize.generate_tokens(io.StringIO(source).readline)
        return not any(t.type == tokenize.COMMENT and t.start[0] == line + 1 for t in tokens)
    except (tokenize.TokenError, SyntaxError):
        return False


def observed_ranges(var: TracedVar) -> tuple[tuple[int, int], ...] | None:
    """A tensor's dims, each as (min, max) over the run; None when there is no shape or the
    number of dims varied."""
    if var.shape is None:
        return None
    if var.dim_ranges is not None:
        return var.dim_ranges
    if var.shape_varies:
        return None  # the number of dims varied
    return tuple((d, d) for d in var.shape)


def _statement_names(statement: str, target: str, ndim: int) -> DimNames | None:
    """The dim names ``statement`` gives ``target`` (a return value's: those of its
    expression)."""
    if target.startswith("<return>"):
        tree = parse_source(statement.strip())
        body = tree.body[0] if tree is not None and tree.body else None
        if not isinstance(body, ast.Return) or body.value is None:
            return None
        value: ast.expr = body.value
        if target != "<return>":  # <return>[1]: an element of a returned tuple
            index = _index_of(target)
            if not isinstance(value, ast.Tuple) or index is None or index >= len(value.elts):
                return None
            value = value.elts[index]
        return value_names(value, ndim)
    return dim_names(statement, target, ndim)


def value_names(value: ast.expr, ndim: int) -> DimNames | None:
    """The dim names of an expression's value, as ``dim_names`` reads an assignment's."""
    return dim_names(f"_ = {ast.unparse(value)}", "_", ndim)


def _index_of(target: str) -> int | None:
    inside = target.removeprefix("<return>")
    if inside.startswith("[") and inside.endswith("]") and inside[1:-1].isdigit():
        return int(inside[1:-1])
    return None


def parse_source(source: str) -> ast.Module | None:
    try:
        return ast.parse(source)
    except (SyntaxError, ValueError):
        return None


def comment_update(text: str, line: int, written: str, rewrite: str) -> TextChange | None:
    """Replace the shape ``written`` in the comment of ``text`` (line ``line``) by
    ``rewrite``: the last occurrence, which is the comment's (code before it may hold the
    same characters, a comment does not follow one)."""
    comment = text.find("#")
    start = text.rfind(written)
    if comment < 0 or start < comment:
        return None
    end = start + len(written)
    return TextChange(line=line, column=start, end_line=line, end_column=end, text=rewrite)
