"""jaxtyping annotations written from a run: a traced function's tensor arguments and
return value as ``Float[Tensor, "4 T 32"]``, over all its calls. Fixed sizes stay numbers;
a dim that varied takes the name the function's body binds it to (``B, T = idx.size()``)
or that built it (``present/dim_names.py``), else a name of its own (``x_dim1``), so that
jaxtyping never holds two unrelated dims equal; ``*x_batch`` where the number of dims
varied."""

from __future__ import annotations

import ast
import io
import keyword
import tokenize
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from shapelens.present.annotations import (
    TextChange,
    observed_ranges,
    parse_source,
    value_names,
)
from shapelens.present.dim_names import DimNames, dim_names
from shapelens.present.literals import int_literal
from shapelens.present.signature_text import annotate, imports, signature_places
from shapelens.trace import TracedLine, TracedVar

# A TracedVar keeps the first 8 distinct shapes (engine/recording/run_records.py): past
# that, the list may miss some.
_SHAPES_KEPT = 8
_FAMILIES = (
    ("Bool", ("bool",)),
    ("Complex", ("complex",)),
    ("Float", ("float", "bfloat")),
    ("Int", ("int", "uint")),
)
_TENSOR_ANNOTATIONS = frozenset({"Tensor", "torch.Tensor"})
"""Annotations the jaxtyping one replaces: they said no more than "a tensor"."""


@dataclass(frozen=True)
class _Seen:
    """What a run saw of one tensor slot (an argument, a return value) over all calls."""

    dtype: str
    ranges: tuple[tuple[int, int], ...] | None
    """Each dim's (min, max); None when the number of dims varied."""
    shapes: tuple[tuple[int, ...], ...]
    complete: bool
    """``shapes`` holds every distinct shape (the trace keeps the first few)."""


def jaxtyping_changes(
    source: str, def_line: int, traced: Mapping[int, TracedLine]
) -> list[TextChange] | None:
    """Edits that annotate the function defined on ``def_line`` (0-based; its ``def`` or a
    decorator line) with what its calls saw: each tensor argument and the return value as
    ``Float[Tensor, "B 4"]``/``Int``/``Bool``, and the imports they need. ``traced``: the
    run's lines by 0-based current line. None when there is nothing to annotate."""
    tree = parse_source(source)
    if tree is None:
        return None
    function = _function_at(tree, def_line)
    if function is None:
        return None
    header = traced.get(function.lineno - 1)
    if header is None:
        return None
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, SyntaxError):
        return None
    signature = signature_places(tokens, function.lineno)
    if signature is None:
        return None
    bound = _bound_dims(function)
    changes: list[TextChange] = []
    families: set[str] = set()
    for arg in _parameters(function):
        var = next((v for v in header.vars if v.name == arg.arg), None)
        seen = _seen(var) if var is not None else None
        span = signature.params.get(arg.arg)
        if var is None or seen is None or span is None or arg.arg in ("self", "cls"):
            continue
        if var.hits < header.hits and not header.sampled:
            continue  # some calls passed no tensor (None, a number)
        if arg.annotation is not None and ast.unparse(arg.annotation) not in _TENSOR_ANNOTATIONS:
            continue  # the author said more than "a tensor": theirs stays
        names = {dim: name for (param, dim), name in bound.items() if param == arg.arg}
        family, text = _annotation(seen, names, arg.arg)
        families.add(family)
        if _defaults_to_none(function, arg):
            text += " | None"
        changes.append(annotate(span, text))
    returned = _return_annotation(function, source, traced, header)
    if returned is not None and signature.returns is not None:
        text, used = returned
        families |= used
        changes.append(annotate(signature.returns, text, arrow=True))
    if not changes:
        return None
    return imports(tree, source, families) + changes


_Function = ast.FunctionDef | ast.AsyncFunctionDef


def _function_at(tree: ast.Module, line: int) -> _Function | None:
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            first = min([d.lineno for d in node.decorator_list] + [node.lineno])
            if first - 1 <= line <= node.lineno - 1:
                return node
    return None


def _parameters(function: _Function) -> list[ast.arg]:
    args = function.args
    return [*args.posonlyargs, *args.args, *args.kwonlyargs]


def _defaults_to_none(function: _Function, arg: ast.arg) -> bool:
    args = function.args
    positional = [*args.posonlyargs, *args.args]
    defaults: list[ast.expr | None] = [None] * (len(positional) - len(args.defaults))
    pairs = list(zip(positional, [*defaults, *args.defaults], strict=True))
    pairs += list(zip(args.kwonlyargs, args.kw_defaults, strict=True))
    default = next((d for a, d in pairs if a is arg), None)
    return isinstance(default, ast.Constant) and default.value is None


def _seen(*vars: TracedVar) -> _Seen | None:
    """What ``vars`` (one slot, e.g. the value of each return statement) saw together."""
    if not vars or any(not v.type.startswith("torch.") or v.shape is None for v in vars):
        return None  # a tensor only: jaxtyping's numpy annotations need another import
    dtypes = {v.dtype for v in vars}
    dtype = dtypes.pop() if len(dtypes) == 1 else None
    if dtype is None or _family(dtype) is None:
        return None
    shapes = tuple(dict.fromkeys(s for v in vars for s in _shapes_of(v)))
    complete = all(len(v.shapes) < _SHAPES_KEPT for v in vars)
    each = [observed_ranges(v) for v in vars]
    ranges: tuple[tuple[int, int], ...] | None = None
    if all(r is not None for r in each) and len({len(r) for r in each if r is not None}) == 1:
        present = [r for r in each if r is not None]
        ranges = tuple(
            (min(r[i][0] for r in present), max(r[i][1] for r in present))
            for i in range(len(present[0]))
        )
    return _Seen(dtype=dtype, ranges=ranges, shapes=shapes, complete=complete)


def _shapes_of(var: TracedVar) -> tuple[tuple[int, ...], ...]:
    return var.shapes or ((var.shape,) if var.shape is not None else ())


def _family(dtype: str) -> str | None:
    for family, prefixes in _FAMILIES:
        if dtype.startswith(prefixes):
            return family
    return None


def _annotation(seen: _Seen, names: Mapping[int, str], slot: str) -> tuple[str, str]:
    """(``Float``, ``Float[Tensor, "4 T 32"]``): fixed dims as sizes, varied ones by the
    name in ``names`` (dim index → name, negative from the end) or ``<slot>_dim<i>``, a name
    of its own so that jaxtyping never holds two unrelated dims equal; ``*<slot>_batch``
    before the trailing dims every shape shared, where the number of dims varied."""
    family = _family(seen.dtype) or "Shaped"
    if seen.ranges is None:
        dims = [f"*{slot}_batch", *(str(d) for d in _shared_tail(seen))]
    else:
        rank = len(seen.ranges)
        dims = [
            str(lo) if lo == hi else names.get(index, names.get(index - rank, f"{slot}_dim{index}"))
            for index, (lo, hi) in enumerate(seen.ranges)
        ]
    # jaxtyping's shape string: dims separated by spaces (not present/shapes.py's tuple text)
    return family, f'{family}[Tensor, "{" ".join(dims)}"]'


def _shared_tail(seen: _Seen) -> list[int]:
    """The trailing sizes every shape seen had, when every distinct shape is known."""
    if not seen.complete or not seen.shapes:
        return []
    tail: list[int] = []
    shortest = min(len(s) for s in seen.shapes)
    for back in range(1, shortest + 1):
        sizes = {s[-back] for s in seen.shapes}
        if len(sizes) != 1:
            break
        tail.insert(0, sizes.pop())
    return tail


def _usable_name(name: str | None) -> bool:
    """A plain identifier: jaxtyping evaluates other text as an expression of dims (and a
    leading ``_`` turns a dim's check off)."""
    return (
        name is not None
        and name.isidentifier()
        and not keyword.iskeyword(name)
        and not name.startswith("_")
    )


def _own_nodes(function: _Function) -> list[ast.AST]:
    """The function's nodes, without those of functions, lambdas and classes inside it."""
    found: list[ast.AST] = []
    stack: list[ast.AST] = list(function.body)
    while stack:
        node = stack.pop()
        found.append(node)
        for child in ast.iter_child_nodes(node):
            if not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda,
                                      ast.ClassDef)):  # fmt: skip
                stack.append(child)
    return found


def _stores(function: _Function) -> dict[str, list[int]]:
    """Each local name the function body assigns → the lines it assigns it on."""
    stores: dict[str, list[int]] = {}
    for node in _own_nodes(function):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            stores.setdefault(node.id, []).append(node.lineno)
    return stores


def _bound_dims(function: _Function) -> dict[tuple[str, int], str]:
    """(argument, dim) → the name the body binds its size to: ``B, T = idx.size()``,
    ``T = x.shape[1]``, ``C = x.size(-1)``. Only names assigned once, from an argument not
    reassigned before: a name is then that very dim on every call."""
    params = {a.arg for a in _parameters(function)}
    stores = _stores(function)
    found: dict[tuple[str, int], str] = {}
    for node in _own_nodes(function):
        if not isinstance(node, ast.Assign) or len(node.targets) != 1:
            continue
        target, value = node.targets[0], node.value
        pairs: list[tuple[str, int, str]] = []
        if isinstance(target, (ast.Tuple, ast.List)):
            whole = _sized(value)
            if whole is not None and whole[1] is None:
                pairs = [
                    (whole[0], index, element.id)
                    for index, element in enumerate(target.elts)
                    if isinstance(element, ast.Name)
                ]
        elif isinstance(target, ast.Name):
            one = _sized(value)
            if one is not None and one[1] is not None:
                pairs = [(one[0], one[1], target.id)]
        for param, dim, name in pairs:
            reassigned = any(line < node.lineno for line in stores.get(param, []))
            once = len(stores.get(name, [])) == 1
            if param in params and not reassigned and once and _usable_name(name):
                found[(param, dim)] = name
    return found


def _sized(value: ast.expr) -> tuple[str, int | None] | None:
    """``x.size()``/``x.shape`` → (x, None); ``x.size(1)``, ``x.shape[1]``,
    ``x.size()[1]`` → (x, 1)."""
    index: int | None = None
    if isinstance(value, ast.Subscript):
        index = int_literal(value.slice)
        if index is None:
            return None
        value = value.value
    if isinstance(value, ast.Attribute) and value.attr == "shape":
        holder = value.value
    elif (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Attribute)
        and value.func.attr == "size"
        and not value.keywords
        and len(value.args) <= 1
    ):
        holder = value.func.value
        if value.args:
            if index is not None:
                return None  # x.size(1)[0]: not a size of x
            index = int_literal(value.args[0])
            if index is None:
                return None
    else:
        return None
    return (holder.id, index) if isinstance(holder, ast.Name) else None


def _return_annotation(
    function: _Function, source: str, traced: Mapping[int, TracedLine], header: TracedLine
) -> tuple[str, set[str]] | None:
    """The return value's annotation and the dtype families it uses, when every return
    statement gives a value, the function cannot end without one, and what ran returned
    tensors (or a tuple of them) every time."""
    nodes = _own_nodes(function)
    returns = sorted((n for n in nodes if isinstance(n, ast.Return)), key=lambda n: n.lineno)
    if any(isinstance(n, (ast.Yield, ast.YieldFrom)) for n in nodes) or not returns:
        return None
    if not _always_returns(function.body) or any(r.value is None for r in returns):
        return None
    width: int | None = None  # the tuple's length, or None for one tensor
    per_slot: dict[int | None, list[TracedVar]] = {}
    names: dict[int | None, list[DimNames | None]] = {}
    hits = 0
    for statement in returns:
        line = traced.get(statement.lineno - 1)
        if line is None:
            continue  # never ran: it says nothing
        values = [v for v in line.vars if v.name.startswith("<return>")]
        value = statement.value
        assert value is not None
        if isinstance(value, ast.Tuple):
            slots: list[int | None] = list(range(len(value.elts)))
            want = {f"<return>[{i}]" for i in range(len(value.elts))}
            if {v.name for v in values} != want or width not in (None, len(value.elts)):
                return None
            if per_slot and None in per_slot:
                return None
            width = len(value.elts)
        else:
            slots = [None]
            if [v.name for v in values] != ["<return>"] or width is not None:
                return None
        for slot in slots:
            wanted = "<return>" if slot is None else f"<return>[{slot}]"
            var = next(v for v in values if v.name == wanted)
            per_slot.setdefault(slot, []).append(var)
            element = value if slot is None else value.elts[slot]  # type: ignore[attr-defined]
            ndim = len(var.shape) if var.shape is not None else 0
            names.setdefault(slot, []).append(_returned_names(function, element, source, ndim))
        hits += min(v.hits for v in values)
    if not per_slot or (hits < header.hits and not header.sampled):
        return None  # some calls returned something else (None, a number), or raised
    texts: list[str] = []
    families: set[str] = set()
    for slot, vars in per_slot.items():
        seen = _seen(*vars)
        if seen is None:
            return None
        slot_name = "ret" if slot is None else f"ret{slot}"
        # a name the code built the dim from: a local, an attribute, the same one on every
        # dim (and argument) it names within one call
        usable = {i: n for i, n in _agreed(names[slot], seen).items() if _usable_name(n)}
        family, text = _annotation(seen, usable, slot_name)
        families.add(family)
        texts.append(text)
    text = texts[0] if width is None else f"tuple[{', '.join(texts)}]"
    return text, families


def _agreed(found: Sequence[DimNames | None], seen: _Seen) -> dict[int, str]:
    """The dim names every return statement gave (by dim index)."""
    if seen.ranges is None or not found or any(f is None for f in found):
        return {}
    first = found[0]
    assert first is not None
    return {
        i: name
        for i, name in enumerate(first)
        if name is not None and all(f is not None and f[i] == name for f in found)
    }


def _returned_names(
    function: _Function, value: ast.expr, source: str, ndim: int
) -> DimNames | None:
    """The dim names of a returned expression: its own (``return x.view(B, T, C)``), or
    those of the assignment that made the returned name, when that assignment is the last
    one of it and sits in the same block before the return (``y = y.view(B, T, C)``)."""
    if not isinstance(value, ast.Name):
        return value_names(value, ndim)
    for block in _blocks(function):
        positions = [i for i, s in enumerate(block) if value in ast.walk(s)]
        if not positions:
            continue
        at = positions[0]
        for statement in reversed(block[:at]):
            if any(
                isinstance(n, ast.Name) and n.id == value.id and isinstance(n.ctx, ast.Store)
                for n in ast.walk(statement)
            ):
                if not isinstance(statement, ast.Assign):
                    return None
                text = ast.get_source_segment(source, statement)
                return dim_names(text, value.id, ndim) if text else None
        return None
    return None


def _blocks(function: _Function) -> list[list[ast.stmt]]:
    """Every statement list of the function (its body, its branches' bodies)."""
    blocks = [function.body]
    for node in _own_nodes(function):
        for field in ("body", "orelse", "finalbody"):
            block = getattr(node, field, None)
            if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
                blocks.append(block)
    # innermost first: the block that holds the return statement itself
    return sorted(blocks, key=lambda b: -b[0].lineno)


def _always_returns(body: Sequence[ast.stmt]) -> bool:
    """The block cannot end without a return (or a raise): no implicit None."""
    if not body:
        return False
    last = body[-1]
    if isinstance(last, (ast.Return, ast.Raise)):
        return True
    if isinstance(last, ast.If):
        return _always_returns(last.body) and _always_returns(last.orelse)
    if isinstance(last, (ast.With, ast.AsyncWith)):
        return _always_returns(last.body)
    return False
