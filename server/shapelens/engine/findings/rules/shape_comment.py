"""``shape_comment``: a shape comment that disagrees with what ran (``# (B, T, hs)`` on a
line that made ``(B, nh, T, hs)``).

A comment's names are bound from the run where the program binds them: the frame's ints
(``B, T, C = x.size()``), ``self.<name>``, a config's attribute (``self.config.n_embd``,
``config.n_embd``, ``args.<name>``), a module-level constant. A name bound nowhere (``nh``,
``hs``) is free: the first dim it meets in a call binds it, and every later comment of the
same call (of the same loop iteration, inside a loop) must agree. A dim whose names are
neither bound nor free-bound yet (``T+1`` before any ``T``), or bound to something other
than an int, is not checked: a finding says only what the run showed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from shapelens.engine.findings.context import RunFacts, resolver, shape_of
from shapelens.engine.findings.events import CommentedStatementEnded
from shapelens.engine.findings.rule import Rule
from shapelens.engine.recording import values
from shapelens.engine.source.shape_comments import (
    Dim,
    WrittenShape,
    evaluate,
    names_in,
)
from shapelens.lazy_regex import LazyPattern
from shapelens.trace.finding import Finding

_OWNERS = ("self", "self.config", "self.cfg", "config", "cfg", "args", "hparams", "opt")
"""Where a comment's bare name is looked up after the frame's own names: ``n_head`` is
``self.n_head`` or ``self.config.n_head`` (nanoGPT), ``args.batch_size`` (argparse)."""
_CAPACITY = LazyPattern(r"batch|block|max|len|context|ctx|seq|window", re.IGNORECASE)
"""Names of capacities, not sizes (``batch_size``, ``block_size``, ``max_len``): bound by a
config or a module constant, a dim smaller than one is the last batch or a short prompt."""
_OPAQUE = object()
MAX_SCOPES = 256
"""Calls whose free names are kept (a frame id reused by a later call starts afresh)."""
"""A name bound to something that is not a size: its dims are not checked."""


@dataclass
class _Scope:
    """One call's free names."""

    call: int
    free: dict[str, tuple[int, int, int, int]]
    """name → (size, the line that bound it, the statement pacing that line, its hits then)."""


class ShapeCommentRule(Rule[CommentedStatementEnded]):
    """``shape_comment``: a shape comment that disagrees with what ran; one per comment."""

    kinds = ("shape_comment",)
    events = (CommentedStatementEnded,)
    setting = "shape_comments"

    def __init__(self, facts: RunFacts) -> None:
        super().__init__(facts)
        self._scopes: dict[int, _Scope] = {}
        self._reported: set[tuple[str, int]] = set()

    def observe(self, seen: CommentedStatementEnded, /) -> list[Finding]:
        where = (seen.info.file, seen.comment.line)
        if where in self._reported:
            return []
        subject = _subject(seen)
        if subject is None:
            return []
        name, value = subject
        shape = shape_of(value)
        if not shape and shape != ():
            return []
        if values.kind_of(value) not in (values.TORCH, values.ARRAY):
            return []
        checks = [(seen.comment.result, name, value, shape), *_inputs(seen)]
        sizes = _Sizes(seen, self._scope(seen))
        for written, label, operand, actual in checks:
            wrong = _disagreement(written, actual, sizes, prose=seen.comment.prose)
            if wrong is not None:
                self._reported.add(where)
                return [
                    Finding(
                        kind="shape_comment",
                        severity="info",
                        file=seen.info.file,
                        line=seen.comment.line,
                        expression=seen.comment.text,
                        operands=(self.facts.operand(label, operand, actual),),
                        expected=written.text,
                        advice=wrong,
                        rewrite=_as_ran(written, actual, sizes),
                    )
                ]
        return []

    def _scope(self, seen: CommentedStatementEnded) -> _Scope:
        info = seen.info
        call = 0 if info.is_module else info.hits.get(info.def_line, 0)
        scope = self._scopes.get(id(seen.frame))
        if scope is None or scope.call != call:  # a frame id reused by a later call
            if len(self._scopes) >= MAX_SCOPES:  # the oldest calls are over: bounded memory
                del self._scopes[next(iter(self._scopes))]
            scope = self._scopes[id(seen.frame)] = _Scope(call=call, free={})
        return scope


def _subject(seen: CommentedStatementEnded) -> tuple[str, Any] | None:
    """The one value the comment is about: the returned value, the named target, or the
    statement's only stored tensor (several: the comment does not say which)."""
    if seen.returned is not None:
        return ("<return>", seen.returned)
    scope = seen.frame.f_locals
    target = seen.comment.target
    if target is not None:
        if target not in seen.stored:
            return None
        return (target, scope.get(target))
    if seen.arguments:
        return None  # a def line's comment: about the arguments or the return, unsaid
    tensors = []
    for name in seen.stored:
        value = scope.get(name) if "." not in name else resolver(seen.frame)(tuple(name.split(".")))
        if values.kind_of(value) in (values.TORCH, values.ARRAY):
            tensors.append((name, value))
    return tensors[0] if len(tensors) == 1 else None


def _inputs(seen: CommentedStatementEnded) -> list[tuple[WrittenShape, str, Any, tuple[int, ...]]]:
    """A chain's input shapes with the operands they are about: the statement's plain-name
    operands (``att @ v``, ``self.proj(x)``) when there are as many as the chain's inputs and
    the statement did not rebind them."""
    written = seen.comment.inputs
    if not written or seen.returned is not None:
        return []
    statement = seen.info.source.statements.get(seen.line)
    value = getattr(statement, "value", None)
    operands: list[str] = []
    if value is not None and type(value).__name__ == "BinOp":
        operands = [getattr(side, "id", "") for side in (value.left, value.right)]
    elif value is not None and type(value).__name__ == "Call":
        operands = [getattr(arg, "id", "") for arg in value.args]
    if len(operands) != len(written) or not all(operands):
        return []
    scope = seen.frame.f_locals
    found = []
    for shape, name in zip(written, operands, strict=True):
        if name in seen.stored:
            return []
        value = scope.get(name)
        actual = shape_of(value)
        if actual is None or values.kind_of(value) not in (values.TORCH, values.ARRAY):
            return []
        found.append((shape, name, value, actual))
    return found


class _Sizes:
    """What a comment's names stand for on this hit: bound from the run, or free."""

    def __init__(self, seen: CommentedStatementEnded, scope: _Scope) -> None:
        self._seen = seen
        self._scope = scope
        self._resolve = resolver(seen.frame)
        info = seen.info
        self._pacer = info.counter_of.get(seen.line, info.def_line)
        self._pace = info.hits.get(self._pacer, 0)

    def bound(self, name: str) -> int | object | None:
        """The size the program binds ``name`` to; ``_OPAQUE`` when it binds it to
        something else; None when it binds it nowhere (free)."""
        return self.binding(name)[0]

    def binding(self, name: str) -> tuple[int | object | None, bool]:
        """``bound(name)``, and whether the frame binds it itself (``B, T = x.shape``)
        rather than a config, an attribute or the module."""
        paths = [name] if "." in name else [name] + [f"{o}.{name}" for o in _OWNERS]
        local = self._seen.frame.f_locals
        for path in paths:
            try:
                value = self._resolve(tuple(path.split(".")))
            except Exception:
                continue
            if value is None or (path == name and callable(value)):
                continue  # a builtin (`len`, `id`) is not a binding of the comment's name
            size = _size(value)
            return (_OPAQUE if size is None else size), path == name and name in local
        return None, False

    def free(self, name: str) -> int | None:
        """The size a free name took earlier in this call (this loop iteration)."""
        entry = self._scope.free.get(name)
        if entry is None:
            return None
        size, line, pacer, pace = entry
        if line == self._seen.line or self._seen.info.hits.get(pacer, 0) != pace:
            return None  # bound on an earlier iteration of its loop (or of this line)
        return size

    def free_names(self) -> list[str]:
        """The free names this call (this pass of its loop) has bound."""
        return [name for name in self._scope.free if self.free(name) is not None]

    def bound_at(self, name: str) -> int:
        return self._scope.free[name][1]

    def bind(self, name: str, size: int) -> None:
        if self._seen.info.is_module:
            return  # a script's top level reuses its letters loosely: no call to hold them
        self._scope.free[name] = (size, self._seen.line, self._pacer, self._pace)

    def known(self, name: str) -> int | None:
        bound = self.bound(name)
        if bound is _OPAQUE:
            return None
        return bound if isinstance(bound, int) else self.free(name)


def _size(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if (
        type(value).__module__ == "numpy"
        and hasattr(value, "__index__")
        and not hasattr(value, "shape")
    ):
        return int(value)  # pragma: no cover - numpy ints are rare as sizes
    return None


def _disagreement(
    written: WrittenShape, actual: tuple[int, ...], sizes: _Sizes, *, prose: bool
) -> str | None:
    """Why ``actual`` is not ``written`` (None: it agrees, or the run cannot tell)."""
    dims = written.dims
    rest = next((i for i, d in enumerate(dims) if d.rest), None)
    if rest is None and len(dims) != len(actual):
        if prose:
            return None
        return f"{len(dims)} dims in the comment, {len(actual)} in the run"
    if rest is not None and len(actual) < len(dims) - 1:
        if prose:
            return None
        return f"at least {len(dims) - 1} dims in the comment, {len(actual)} in the run"
    pairs = _aligned(dims, actual, rest)
    new: dict[str, tuple[int, int]] = {}  # free names this comment binds: name → (size, dim)
    for index, dim, size in pairs:
        if dim.name is None:
            continue
        bound, local = sizes.binding(dim.name)
        if bound is _OPAQUE:
            continue
        if isinstance(bound, int):
            if size < bound and not local and _CAPACITY.search(dim.name):
                continue
            if bound != size:
                return _wrong(index, dim, bound, size, "as the program binds it")
            continue
        earlier = new.get(dim.name)
        if earlier is not None:
            if earlier[0] != size:
                return _wrong(index, dim, earlier[0], size, f"as dim {earlier[1]}")
            continue
        before = sizes.free(dim.name)
        if before is not None:
            if before != size:
                line = sizes.bound_at(dim.name)
                return _wrong(index, dim, before, size, f"at line {line} of this call")
            continue
        new[dim.name] = (size, index)
    for name, (size, _) in new.items():
        sizes.bind(name, size)
    for index, dim, size in pairs:
        if dim.size is not None and dim.size != size:
            return f"dim {index} is {dim.text} in the comment, {size} in the run"
        if dim.expr is not None:
            known = {n: sizes.known(n) for n in names_in(dim.expr)}
            if any(v is None for v in known.values()):
                continue
            expected = evaluate(dim.expr, {n: v for n, v in known.items() if v is not None})
            if expected is not None and expected != size:
                shown = int(expected) if float(expected).is_integer() else expected
                bindings = ", ".join(f"{n}={v}" for n, v in known.items())
                return f"dim {index} is {dim.text} = {shown} ({bindings}), {size} in the run"
    return None


def _aligned(
    dims: tuple[Dim, ...], actual: tuple[int, ...], rest: int | None
) -> list[tuple[int, Dim, int]]:
    if rest is None:
        return [(i, d, s) for i, (d, s) in enumerate(zip(dims, actual, strict=True))]
    after = len(dims) - rest - 1
    head = [(i, dims[i], actual[i]) for i in range(rest)]
    tail_start = len(actual) - after
    tail = [(tail_start + j, dims[rest + 1 + j], actual[tail_start + j]) for j in range(after)]
    return head + tail


def _wrong(index: int, dim: Dim, expected: int, size: int, why: str) -> str:
    return f"dim {index} is {dim.text}, {expected} {why}, but {size} in the run"


def _as_ran(written: WrittenShape, actual: tuple[int, ...], sizes: _Sizes) -> str:
    """``actual`` written with the comment's names where their sizes say so (``(B, nh, T,
    hs)`` on a ``(12, 4, 16, 16)`` score matrix: ``(B, nh, T, T)``), the call's other free
    names next, numbers elsewhere, in the comment's brackets."""
    dims = written.dims
    same_rank = len(dims) == len(actual) and not any(d.rest for d in dims)
    names = [d.name for d in dims if d.name is not None]
    names += [n for n in sizes.free_names() if n not in names]
    known = {name: sizes.known(name) for name in names}
    pieces = []
    for index, size in enumerate(actual):
        written_here = dims[index] if same_rank else None
        if written_here is not None and _means(written_here, size, sizes):
            pieces.append(written_here.text)
            continue
        pieces.append(next((n for n in names if known[n] == size), str(size)))
    text = ", ".join(pieces) + ("," if len(pieces) == 1 else "")
    return written.text[0] + text + written.text[-1]


def _means(dim: Dim, size: int, sizes: _Sizes) -> bool:
    """Whether ``dim`` as written stands for ``size`` on this hit."""
    if dim.size is not None:
        return dim.size == size
    if dim.name is not None:
        return sizes.known(dim.name) == size
    if dim.expr is not None:
        values = {n: sizes.known(n) for n in names_in(dim.expr)}
        if any(v is None for v in values.values()):
            return False
        return evaluate(dim.expr, {n: v for n, v in values.items() if v is not None}) == size
    return False
