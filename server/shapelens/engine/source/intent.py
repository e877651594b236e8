"""Reading the author's intent from source text: did they shape a tensor to broadcast it?

An explicit ``None``/``np.newaxis`` index, ``unsqueeze``, ``view``, ``reshape``, ``expand``
or a transpose that made the shapes differ says "this broadcast is on purpose" (a
positional encoding's ``position * div_term``, pairwise ``x[:, None] - x[None]``). A loss
that reduces the broadcast result to one number says the opposite: an (N,N) matrix summed
into a loss is the seed's bug, whatever made it.
"""

from __future__ import annotations

import ast

from shapelens.lazy_regex import LazyPattern

SHAPING_METHODS = frozenset(
    {
        "unsqueeze",
        "view",
        "reshape",
        "expand",
        "expand_as",
        "view_as",
        "reshape_as",
        "unflatten",
        "t",
        "transpose",
        "permute",
        "outer",
        "atleast_2d",
        "newaxis",
    }
)
SHAPING_ATTRIBUTES = frozenset({"T", "mT", "newaxis"})
REDUCTIONS = frozenset({"mean", "sum", "norm", "nanmean", "nansum", "prod", "item"})
LOSS_CALL = LazyPattern(r"(^|_)loss$|^(mse|l1|cross_entropy|nll|binary_cross_entropy\w*|kl_div)")

# The same markers in a line of source (where a value was born).
_SHAPING_TEXT = LazyPattern(
    r"\.(unsqueeze|view|reshape|expand|expand_as|view_as|reshape_as|unflatten|t|transpose|"
    r"permute)\(|\.(T|mT)\b|\bNone\s*[\],]|newaxis|\bouter\("
)
_KEEPDIM_TEXT = LazyPattern(r"keepdims?\s*=\s*True")

NO_SHAPING, KEEPDIM, EXPLICIT = 0, 1, 2
"""How strongly source shows a broadcast is meant: an explicit None/unsqueeze/view is
intent even inside a loss; a ``keepdim=True`` column is intent only when the result is not
reduced to one number (``a2 + b2`` of squared norms, not ``(preds == y).mean()``)."""


def silences(shaping: int, *, reduced: bool) -> bool:
    return shaping == EXPLICIT or (shaping == KEEPDIM and not reduced)


def shaping_of(node: ast.AST) -> int:
    """How the expression shapes a tensor: EXPLICIT (None index, unsqueeze, view, ...),
    KEEPDIM (``x.sum(1, keepdim=True)``) or NO_SHAPING."""
    found = NO_SHAPING
    for sub in ast.walk(node):
        if isinstance(sub, ast.Subscript) and _has_none_index(sub.slice):
            return EXPLICIT
        if isinstance(sub, ast.Attribute) and sub.attr in SHAPING_ATTRIBUTES:
            return EXPLICIT
        if (
            isinstance(sub, ast.Call)
            and isinstance(sub.func, ast.Attribute)
            and sub.func.attr in SHAPING_METHODS
        ):
            return EXPLICIT
        if isinstance(sub, ast.Call) and any(_keeps_dims(k) for k in sub.keywords):
            found = KEEPDIM
    return found


def line_shaping(text: str) -> int:
    """The same question about a line of source (the line where an operand was born)."""
    if _SHAPING_TEXT.search(text):
        return EXPLICIT
    return KEEPDIM if _KEEPDIM_TEXT.search(text) else NO_SHAPING


def _keeps_dims(keyword: ast.keyword) -> bool:
    return (
        keyword.arg in ("keepdim", "keepdims")
        and isinstance(keyword.value, ast.Constant)
        and keyword.value.value is True
    )


def _has_none_index(index: ast.AST) -> bool:
    parts = index.elts if isinstance(index, ast.Tuple) else [index]
    return any(
        (isinstance(p, ast.Constant) and p.value is None)
        or (isinstance(p, ast.Attribute) and p.attr == "newaxis")
        for p in parts
    )


def reduced_to_scalar(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    """The value of ``node`` flows, through elementwise steps, into a whole reduction or a
    loss: ``((a - b) ** 2).mean()``, ``torch.sum(a * b)``, ``F.l1_loss(a - b, ...)``."""
    current = node
    while True:
        parent = parents.get(current)
        if parent is None:
            return False
        if isinstance(parent, (ast.BinOp, ast.UnaryOp)):
            current = parent
            continue
        if isinstance(parent, ast.Attribute) and parent.value is current:
            call = parents.get(parent)
            if not (isinstance(call, ast.Call) and call.func is parent):
                return False
            if parent.attr in REDUCTIONS:
                return not call.args and not any(k.arg in ("dim", "axis") for k in call.keywords)
            if parent.attr in ("abs", "pow", "square", "sqrt", "exp", "log", "float", "double"):
                current = call
                continue
            return False
        if isinstance(parent, ast.Call) and current in parent.args:
            name = _called_name(parent.func)
            if name in REDUCTIONS:
                rest = [a for a in parent.args if a is not current]
                return not rest and not any(k.arg in ("dim", "axis") for k in parent.keywords)
            return bool(LOSS_CALL.search(name))
        return False


def _called_name(func: ast.AST) -> str:
    if isinstance(func, ast.Attribute):
        return func.attr
    if isinstance(func, ast.Name):
        return func.id
    return ""
