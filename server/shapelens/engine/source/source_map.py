"""Static facts about a source file, computed once per file from its AST.

The tracer needs to know, for every line a line event can report, which *statement* it
belongs to (multi-line statements fire several line events), the ``def`` line of each
function (``co_firstlineno`` is the first decorator's line), and which elementwise
expressions a statement contains (for the broadcast finding).
"""

from __future__ import annotations

import ast
import io
import linecache
import tokenize
from dataclasses import dataclass, field
from typing import Any

from shapelens.engine.recording.scope import UserCodeScope
from shapelens.engine.source.elementwise import OPERATOR_OF_NAME
from shapelens.engine.source.intent import reduced_to_scalar, shaping_of
from shapelens.engine.source.segments import compiler_lines, segment
from shapelens.engine.source.shape_comments import ShapeComment, shape_comments

# A tiny expression tree the broadcast check evaluates with operand shapes:
#   ("name", path)            path: ("y",) or ("self", "bias")
#   ("scalar",)               a numeric literal
#   ("op", symbol, text, left, right)
Expr = tuple[Any, ...]


@dataclass(frozen=True)
class Candidate:
    """A fully-understood elementwise expression (names, attributes, literals only)."""

    expr: Expr
    reduced: bool
    """Its value flows into a whole reduction or a loss (``((y - p) ** 2).mean()``)."""


@dataclass(frozen=True)
class OpSite:
    """One elementwise operator of a statement, for the checks that see operand *values*
    (calls, subscripts): which operator, its operands' text, and what the text shows."""

    op: str
    text: str
    left: str
    right: str
    shaping: int
    """How the operands' text shapes them (``intent.EXPLICIT``, ``KEEPDIM``, none)."""
    reduced: bool


_COMPARISONS: dict[type[ast.cmpop], str] = {
    ast.Eq: "==",
    ast.NotEq: "!=",
    ast.Lt: "<",
    ast.LtE: "<=",
    ast.Gt: ">",
    ast.GtE: ">=",
}
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
    elementwise: dict[int, tuple[Candidate, ...]] = field(default_factory=dict)
    op_sites: dict[int, tuple[OpSite, ...]] = field(default_factory=dict)
    """Every elementwise operator of a statement, in evaluation order."""
    statements: dict[int, ast.AST] = field(default_factory=dict)
    counter_of: dict[int, int] = field(default_factory=dict)
    """Statement → the statement whose hits pace it: its innermost enclosing loop's header,
    else its function's ``def`` line (calls). Absent at module level outside loops."""
    loop_headers: frozenset[int] = frozenset()
    call_lines: frozenset[int] = frozenset()
    """Simple statements that may call torch (a call, an operator, a subscript): the op
    watch follows them on their checked hits (a failing call explained from its operands)."""
    target_stores: dict[int, tuple[str, ...]] = field(default_factory=dict)
    """Statement → what it stores into that is not a plain name: ``self.weight`` for
    ``self.weight = …``, ``pe`` for ``pe[:, 0::2] = …`` (read after the store)."""
    _comments: list[dict[int, ShapeComment]] = field(default_factory=list, compare=False)
    _texts: dict[int, str] = field(default_factory=dict, compare=False)

    def shape_comments(self) -> dict[int, ShapeComment]:
        """Statement → the shape comment its author wrote about it (read once, on demand)."""
        if not self._comments:
            definitions = frozenset(self.def_line_of.values())
            self._comments.append(shape_comments(self.lines, self.statement_of, definitions))
        return self._comments[0]

    def text(self, line: int) -> str:
        return self.lines[line - 1].rstrip("\n") if 0 < line <= len(self.lines) else ""

    def assignment_line(self, name: str, *, on_self: bool) -> int | None:
        """The first line that assigns ``name`` (``self.name = ...`` with ``on_self``)."""
        lines = []
        for line, node in self.statements.items():
            targets: list[ast.expr] = []
            if isinstance(node, ast.Assign):
                targets = list(node.targets)
            elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
                targets = [node.target]
            for target in targets:
                if (
                    on_self
                    and (
                        isinstance(target, ast.Attribute)
                        and target.attr == name
                        and isinstance(target.value, ast.Name)
                        and target.value.id == "self"
                    )
                ) or (
                    not on_self
                    and any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(target))
                ):
                    lines.append(line)
        return min(lines) if lines else None

    def statement_text(self, line: int) -> str:
        """The code of the statement that starts on ``line``, comments left out (a long call
        over several lines is one text; a compound statement gives its header; made once)."""
        text = self._texts.get(line)
        if text is None:
            text = self._texts[line] = self._statement_text(line)
        return text

    def _statement_text(self, line: int) -> str:
        node = self.statements.get(line)
        if isinstance(node, ast.stmt) and not hasattr(node, "body"):
            text = segment(self.lines, node)
            if text is not None:
                return " ".join(_without_comments(text).split())
        return " ".join(_without_comments(self.text(line)).split())


def _without_comments(text: str) -> str:
    """``x = f(y)  # expect: broadcast`` → ``x = f(y)``: what a rule reads is code only."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError):
        return text
    lines = text.splitlines()
    for token in reversed(tokens):
        if token.type == tokenize.COMMENT:
            row, col = token.start
            lines[row - 1] = lines[row - 1][:col]
    return "\n".join(lines)


def _has_elementwise(stmt: ast.stmt) -> bool:
    return any(
        (isinstance(n, ast.BinOp) and type(n.op) in _ELEMENTWISE_OPS)
        or (isinstance(n, ast.Compare) and type(n.ops[0]) in _COMPARISONS)
        or _called_operator(n) is not None
        for n in ast.walk(stmt)
    )


_CALLING = (ast.Call, ast.BinOp, ast.UnaryOp, ast.Compare, ast.Subscript)


def _may_call_torch(node: ast.AST) -> bool:
    return isinstance(node, ast.AugAssign) or any(isinstance(n, _CALLING) for n in ast.walk(node))


def _header_parts(node: ast.AST) -> list[ast.AST]:
    """What a compound statement's header evaluates (a test, a context)."""
    if isinstance(node, (ast.While, ast.If)):
        return [node.test]
    if isinstance(node, (ast.With, ast.AsyncWith)):
        return [item.context_expr for item in node.items]
    return []


def evaluated_on_its_line(node: ast.AST) -> list[ast.AST]:
    """What a statement's own line evaluates: a simple statement whole; a compound one's
    header only (a loop's iterable, a test, a context), never its body."""
    if isinstance(node, (ast.For, ast.AsyncFor)):
        return [node.iter]
    return _header_parts(node) if isinstance(node, _COMPOUND) else [node]


def _called_operator(node: ast.AST) -> tuple[str, ast.expr, ast.expr] | None:
    """``a.eq(b)`` and ``torch.eq(a, b)``: the operator (``==``) and its two operands."""
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
        return None
    symbol = OPERATOR_OF_NAME.get(node.func.attr)
    if symbol is None or any(isinstance(arg, ast.Starred) for arg in node.args):
        return None
    if len(node.args) == 1:
        return symbol, node.func.value, node.args[0]
    if len(node.args) == 2 and isinstance(node.func.value, ast.Name):  # a module's function
        return symbol, node.args[0], node.args[1]
    return None


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


def _to_expr(node: ast.expr, source: tuple[str, ...]) -> Expr | None:
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
        text = segment(source, node) or _ELEMENTWISE_OPS[type(node.op)]
        return ("op", _ELEMENTWISE_OPS[type(node.op)], " ".join(text.split()), left, right)
    return None


def _operand_count(expr: Expr) -> int:
    """Non-literal leaves: a broadcast needs at least two arrays."""
    if expr[0] == "op":
        return _operand_count(expr[3]) + _operand_count(expr[4])
    return 1 if expr[0] == "name" else 0


def _parents(stmt: ast.stmt) -> dict[ast.AST, ast.AST]:
    return {child: node for node in ast.walk(stmt) for child in ast.iter_child_nodes(node)}


def _elementwise_candidates(
    stmt: ast.stmt, source: tuple[str, ...], parents: dict[ast.AST, ast.AST]
) -> tuple[Candidate, ...]:
    """Largest fully-understood elementwise sub-expressions of one statement."""
    found: list[Candidate] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, _NESTED_SCOPES) or (node is not stmt and isinstance(node, ast.stmt)):
            return
        if isinstance(node, ast.BinOp) and type(node.op) in _ELEMENTWISE_OPS:
            expr = _to_expr(node, source)
            if expr is not None:
                if _operand_count(expr) >= 2:
                    found.append(Candidate(expr, reduced_to_scalar(node, parents)))
                return
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(stmt)
    return tuple(found)


def _op_sites(
    stmt: ast.stmt, source: tuple[str, ...], parents: dict[ast.AST, ast.AST]
) -> tuple[OpSite, ...]:
    """Every elementwise operator and comparison (``a - b``, ``a.sub(b)``, ``torch.sub(a, b)``),
    in the order Python evaluates them."""
    sites: list[OpSite] = []

    def text(node: ast.AST) -> str:
        return " ".join((segment(source, node) or "?").split())

    def visit(node: ast.AST) -> None:
        if isinstance(node, _NESTED_SCOPES) or (node is not stmt and isinstance(node, ast.stmt)):
            return
        for child in ast.iter_child_nodes(node):  # operands are evaluated first
            visit(child)
        pair: tuple[str, ast.expr, ast.expr] | None = None
        if isinstance(node, ast.BinOp) and type(node.op) in _ELEMENTWISE_OPS:
            pair = (_ELEMENTWISE_OPS[type(node.op)], node.left, node.right)
        elif (
            isinstance(node, ast.Compare)
            and len(node.ops) == 1
            and type(node.ops[0]) in _COMPARISONS
        ):
            pair = (_COMPARISONS[type(node.ops[0])], node.left, node.comparators[0])
        else:
            pair = _called_operator(node)
        if pair is None:
            return
        op, left, right = pair
        sites.append(
            OpSite(
                op=op,
                text=text(node),
                left=text(left),
                right=text(right),
                shaping=max(shaping_of(left), shaping_of(right)),
                reduced=reduced_to_scalar(node, parents),
            )
        )

    visit(stmt)
    return tuple(sites)


def build_source_map(path: str, source: str) -> SourceMap:
    lines = compiler_lines(source)
    try:
        tree = ast.parse(source, filename=path)
    except (SyntaxError, ValueError):
        return SourceMap(path=path, lines=lines)
    statement_of: dict[int, int] = {}
    def_line_of: dict[int, int] = {}
    elementwise: dict[int, tuple[Candidate, ...]] = {}
    op_sites: dict[int, tuple[OpSite, ...]] = {}
    statements: dict[int, ast.AST] = {}
    target_stores: dict[int, tuple[str, ...]] = {}
    call_lines: set[int] = set()
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
            # A loop's next item is a call (`for xb, yb in loader:` collates the batch).
            if isinstance(node, (ast.For, ast.AsyncFor)) or any(
                _may_call_torch(part) for part in _header_parts(node)
            ):
                call_lines.add(start)
        else:
            for line in range(start, int(node.end_lineno or start) + 1):
                statement_of[line] = start
            if _has_elementwise(node):
                parents = _parents(node)
                candidates = _elementwise_candidates(node, lines, parents)
                if candidates:
                    elementwise[start] = elementwise.get(start, ()) + candidates
                op_sites[start] = op_sites.get(start, ()) + _op_sites(node, lines, parents)
            if _may_call_torch(node):
                call_lines.add(start)
        statements.setdefault(start, node)
        stored = _target_stores(node)
        if stored:
            target_stores[start] = stored
    counter_of: dict[int, int] = {}
    _pace(tree.body, None, counter_of)
    loop_headers = frozenset(line for line, node in statements.items() if isinstance(node, _LOOPS))
    return SourceMap(
        path=path,
        lines=lines,
        statement_of=statement_of,
        def_line_of=def_line_of,
        elementwise=elementwise,
        op_sites=op_sites,
        statements=statements,
        counter_of=counter_of,
        loop_headers=loop_headers,
        call_lines=frozenset(call_lines),
        target_stores=target_stores,
    )


def _target_stores(node: ast.stmt) -> tuple[str, ...]:
    """The attribute paths and subscripted names an assignment stores into."""
    if isinstance(node, ast.Assign):
        targets: list[ast.expr] = list(node.targets)
    elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
        targets = [node.target]
    else:
        return ()
    found: list[str] = []
    while targets:
        target = targets.pop(0)
        if isinstance(target, (ast.Tuple, ast.List)):
            targets.extend(target.elts)
            continue
        if isinstance(target, ast.Starred):
            targets.append(target.value)
            continue
        path = None
        if isinstance(target, ast.Attribute):
            path = _path_of(target)
        elif isinstance(target, ast.Subscript):
            path = _path_of(target.value)
        name = ".".join(path) if path else None
        if name and name not in found:
            found.append(name)
    return tuple(found)


_LOOPS = (ast.For, ast.AsyncFor, ast.While)


def _pace(body: list[ast.stmt], counter: int | None, out: dict[int, int]) -> None:
    """Fill ``out`` with the counter statement of every statement in ``body`` (nested too)."""
    for node in body:
        if counter is not None:
            out.setdefault(int(node.lineno), counter)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            _pace(node.body, int(node.lineno), out)
        elif isinstance(node, ast.ClassDef):
            _pace(node.body, None, out)  # a class body runs once, like module code
        elif isinstance(node, _LOOPS):
            _pace(node.body, int(node.lineno), out)
            _pace(node.orelse, counter, out)
        else:
            for field_name in ("body", "orelse", "finalbody", "handlers", "cases"):
                children = getattr(node, field_name, None)
                if not isinstance(children, list):
                    continue
                for child in children:
                    if isinstance(child, (ast.ExceptHandler, ast.match_case)):
                        if isinstance(child, ast.ExceptHandler) and counter is not None:
                            out.setdefault(int(child.lineno), counter)
                        _pace(child.body, counter, out)
                    elif isinstance(child, ast.stmt):
                        _pace([child], counter, out)


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


def declared_in_class(
    sources: SourceMaps, scope: UserCodeScope, owner: Any, name: str
) -> tuple[str, int] | None:
    """Where ``owner``'s class (or a base class in user code) assigns ``self.<name> = ...``
    in its ``__init__``: the line that declared a submodule."""
    for klass in type(owner).__mro__:
        code = getattr(getattr(klass, "__init__", None), "__code__", None)
        if code is None or code.co_filename.startswith("<"):
            continue
        file = scope.user_file(code.co_filename)
        if file is None:
            continue  # torch's own classes (ModuleList, ModuleDict) declare nothing we show
        found = sources.get(file).assignment_line(name, on_self=True)
        if found is not None:
            return file, found
    return None
