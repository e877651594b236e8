"""Which name each dim of a tensor came from, read from the statement that made it:
``x.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)`` gives
``(B, n_head, T, C // n_head)``. Hover writes ``(B=4, n_head=4, T=64, C // n_head=16)``."""

from __future__ import annotations

import ast
from collections.abc import Sequence

from shapelens.present.literals import int_literal

DimNames = tuple[str | None, ...]

# Methods and functions whose arguments are the new shape, one int per dim (or one tuple).
_SHAPE_METHODS = frozenset({"view", "reshape", "expand", "new_zeros", "new_ones", "new_empty",
                            "new_full", "repeat"})  # fmt: skip
_SHAPE_FUNCTIONS = frozenset({"zeros", "ones", "empty", "rand", "randn", "full", "randint"})
# Methods that keep every dim where it is.
_SAME_SHAPE = frozenset({
    "contiguous", "float", "half", "double", "long", "int", "bool", "to", "cuda", "cpu",
    "detach", "clone", "requires_grad_", "type_as", "relu", "sigmoid", "tanh", "exp", "log",
    "abs", "neg", "sqrt",
})  # fmt: skip


def dim_names(statement: str, target: str, ndim: int) -> DimNames | None:
    """The name behind each of the ``ndim`` dims of what ``statement`` binds to ``target``;
    None when the statement does not say (no shape call, a count that does not match)."""
    try:
        tree = ast.parse(statement.strip())
    except SyntaxError:
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == target for t in node.targets
        ):
            names = _names(node.value)
            if names is not None and len(names) == ndim and any(names):
                return names
    return None


def _names(node: ast.expr) -> DimNames | None:
    if not isinstance(node, ast.Call):
        return None
    func = node.func
    method = func.attr if isinstance(func, ast.Attribute) else None
    function = method if method is not None else getattr(func, "id", None)
    if method in _SHAPE_METHODS or (function in _SHAPE_FUNCTIONS and _is_torch_call(func)):
        args: Sequence[ast.expr] = node.args
        if function == "full" or function == "new_full":
            args = args[:1]
        if function == "randint":
            args = [a for a in args if isinstance(a, (ast.Tuple, ast.List))][:1]
        if len(args) == 1 and isinstance(args[0], (ast.Tuple, ast.List)):
            args = args[0].elts
        return tuple(_dim_name(a) for a in args)
    if method is None or not isinstance(func, ast.Attribute):
        return None
    inner = _names(func.value)
    if inner is None:
        return None
    if method in _SAME_SHAPE:
        return inner
    ints = [int_literal(a) for a in node.args]  # transpose(1, 2)
    if method in ("transpose", "swapaxes") and len(ints) == 2 and None not in ints:
        first, second = (i % len(inner) for i in ints)  # type: ignore[operator]
        swapped = list(inner)
        swapped[first], swapped[second] = swapped[second], swapped[first]
        return tuple(swapped)
    if method == "permute":
        order = (
            ints
            if len(node.args) != 1
            else [int_literal(e) for e in getattr(node.args[0], "elts", [])]
        )
        if len(order) == len(inner) and None not in order:
            return tuple(inner[i % len(inner)] for i in order)  # type: ignore[operator]
    return None


def _is_torch_call(func: ast.expr) -> bool:
    """``torch.zeros`` or a bare ``zeros`` (``from torch import zeros``)."""
    if isinstance(func, ast.Name):
        return True
    module = func.value if isinstance(func, ast.Attribute) else None
    return isinstance(module, ast.Name) and module.id in ("torch", "np", "numpy")


def _dim_name(node: ast.expr) -> str | None:
    """``B`` → "B"; ``self.n_head`` → "n_head"; ``C // self.n_head`` → "C // n_head";
    literals (``-1``, ``64``) → None: they name nothing."""
    if isinstance(node, ast.Constant) or (
        isinstance(node, ast.UnaryOp) and isinstance(node.operand, ast.Constant)
    ):
        return None
    return ast.unparse(_without_self(node))


def _without_self(node: ast.expr) -> ast.expr:
    class Strip(ast.NodeTransformer):
        def visit_Attribute(self, attr: ast.Attribute) -> ast.AST:
            if isinstance(attr.value, ast.Name) and attr.value.id in ("self", "config", "cfg"):
                return ast.Name(id=attr.attr, ctx=ast.Load())
            return self.generic_visit(attr)

    return Strip().visit(ast.parse(ast.unparse(node), mode="eval").body)  # type: ignore[no-any-return]
