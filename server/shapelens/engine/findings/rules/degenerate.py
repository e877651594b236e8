"""``degenerate_op``: a torch call the user made that runs, and cannot do what it was written for.

Silent bugs, found from the call itself (the op watch's ``Called`` records, calls the
statement made directly, on its checked hits):

- a normalisation over a dim of size 1: ``log_softmax(dim=1)`` of ``(N, 1)`` logits is 0
  everywhere, ``softmax`` 1, ``F.normalize`` the sign; no gradient flows back;
- a reduction with ``keepdim=True`` over dims that all have size 1: its result is its input;
- a ``.squeeze()`` without a dim whose result's rank changed between hits while its input's
  did not: ``(B, 1)`` → ``(B,)``, but a batch of one ``(1, 1)`` → ``()``.

The first two fire only when the dim had size 1 on every checked hit, at least
:data:`CONFIRM` of them: a decoder's first step attends over one key (size 1, then 2, 3…),
and a batch of one reduced over its batch dim is ordinary. The last batch of a loader comes
on a hit the op watch rarely sees; a name bound by ``x = <…>.squeeze()`` is read on that
hit, so a rank change of ``x``'s records (``VarStats.ndim_varies``) is a finding too.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from typing import Any

from shapelens.engine.findings.context import RunFacts, load_paths, resolver, shape_of
from shapelens.engine.findings.events import CallRan, ValuesChanged
from shapelens.engine.findings.op_names import op_label
from shapelens.engine.findings.op_watch import Called
from shapelens.engine.findings.rule import Rule
from shapelens.engine.findings.shapes import numel
from shapelens.engine.recording import values
from shapelens.engine.recording.code_info import CodeInfo
from shapelens.trace.finding import Finding, Operand

CONFIRM = 2
"""Checked hits on which a dim must have had size 1 (and never more) to be reported."""
_MAX_KEYS = 4096
"""Call sites remembered (memory stays bounded on generated code)."""

_ONE_LOGIT = "take it over the classes, or use a sigmoid / BCEWithLogitsLoss for one logit"
# op name → (its value over a size-1 dim, what to write instead, the dim's position, default)
_NORMALISING: dict[str, tuple[str, str, int, int | None]] = {
    "softmax": ("1 everywhere", _ONE_LOGIT, 1, None),
    "log_softmax": ("0 everywhere", _ONE_LOGIT, 1, None),
    "normalize": ("±1 everywhere (the sign of its input)", "normalise over the features", 2, 1),
}
_REDUCING = frozenset(
    ("sum", "mean", "nansum", "nanmean", "prod", "amax", "amin", "max", "min", "logsumexp",
     "median", "nanmedian", "std", "var")
)  # fmt: skip
_JUDGED = frozenset((*_NORMALISING, *_REDUCING, "squeeze"))
_SPREAD = frozenset(("std", "var"))
"""Reductions that are not their input over one element: NaN (0 with correction=0)."""
_NOT_BOUND = ("torch", "F", "functional")
"""Receivers of a function (``F.softmax(x)``), not of a method (``x.softmax()``)."""


class DegenerateRule(Rule[CallRan | ValuesChanged]):
    """``degenerate_op`` (see the module's doc); one finding per line."""

    kinds = ("degenerate_op",)
    events = (CallRan, ValuesChanged)
    setting = "degenerate"

    def __init__(self, facts: RunFacts) -> None:
        super().__init__(facts)
        self._size_one: dict[tuple[str, int, str, int], int] = {}
        """A call site → checked hits its dims had size 1 on; -1 once they had more."""
        self._squeezed: dict[tuple[str, int, int], tuple[tuple[int, ...], tuple[int, ...]]] = {}
        """A bare ``squeeze()`` call site → the (input, result) shapes it first saw."""
        self._squeeze_ranks: dict[tuple[str, int], set[int]] = {}
        """Input ranks the op watch saw squeezed on a line."""
        self._bound: dict[tuple[str, int], tuple[str, str] | None] = {}
        """Statements ``x = <…>.squeeze()``: (``x``, op), else None."""
        self._reported: set[tuple[str, int]] = set()

    def observe(self, seen: CallRan | ValuesChanged, /) -> list[Finding]:
        info, line = seen.info, seen.line
        if (info.file, line) in self._reported:
            return []
        if isinstance(seen, ValuesChanged):
            return self._rank_changed(info, line)
        called = seen.called
        if not (called.direct or called.wrapper is not None) or not called.args:
            return []
        if not called.results:
            return []
        # A torch.nn module called on the line is judged as the call it makes (nn.Softmax as
        # F.softmax); a user's module's calls are its own lines' business.
        op = called.op if called.wrapper is None else op_label(called.func)
        name = op.rsplit(".", 1)[-1]
        if name not in _JUDGED:
            return []  # and not counted: the broadcast rule counts operators ("+") there
        index = seen.counts.get(op, 0)
        seen.counts[op] = index + 1
        x = called.args[0]
        shape = shape_of(x)
        if not shape:
            return []
        if name == "squeeze":
            return self._squeeze(seen, index, x, shape)
        advice = _degenerate(name, called, shape)
        key = (info.file, line, op, index)
        count = self._size_one.get(key, 0)
        if count < 0 or (key not in self._size_one and len(self._size_one) >= _MAX_KEYS):
            return []
        self._size_one[key] = count = count + 1 if advice else -1
        if advice is None or count < CONFIRM:
            return []
        if called.wrapper is not None:
            return self._report_wrapper(seen, x, shape, advice)
        return self._report(info, line, op, self._operand(seen, index, x, shape), advice)

    def _report_wrapper(
        self, seen: CallRan, x: Any, shape: tuple[int, ...], advice: str
    ) -> list[Finding]:
        """A torch.nn module called on the line did nothing useful: named as written
        (```self.softmax` (Softmax)``), its input by its text at the call."""
        wrapper = seen.called.wrapper
        call = _module_call(seen.info.source.statements.get(seen.line), wrapper, seen.called)
        label = ast.unparse(call.func) if call is not None else "module"
        given = ast.unparse(call.args[0]) if call is not None and call.args else "input"
        op = f"`{label}` ({type(wrapper).__name__})"
        return self._report(seen.info, seen.line, op, self.facts.operand(given, x, shape), advice)

    # -- squeeze ---------------------------------------------------------------------
    def _squeeze(self, seen: CallRan, index: int, x: Any, shape: tuple[int, ...]) -> list[Finding]:
        called, info, line = seen.called, seen.info, seen.line
        if called.op not in ("Tensor.squeeze", "torch.squeeze"):
            return []
        if len(called.args) > 1 or called.kwargs.get("dim") is not None:
            return []  # a dim named: only that one goes
        ranks = self._squeeze_ranks.setdefault((info.file, line), set())
        ranks.add(len(shape))
        result = shape_of(called.results[0])
        key = (info.file, line, index)
        first = self._squeezed.get(key)
        if result is None or (first is None and len(self._squeezed) >= _MAX_KEYS):
            return []
        if first is None:
            self._squeezed[key] = (shape, result)
            return []
        before, before_result = first
        if len(before) != len(shape) or len(before_result) == len(result):
            return []
        ones = [d for d, size in enumerate(before) if size == 1]
        dim = str(ones[0]) if len(ones) == 1 else "dim"
        advice = (
            f"without a dim it drops every dim of size 1: {_shape(before)} → "
            f"{_shape(before_result)} on an earlier hit, {_shape(shape)} → {_shape(result)} "
            f"here (a batch of one?); name the dim it should drop: `.squeeze({dim})`"
        )
        return self._report(info, line, called.op, self._operand(seen, index, x, shape), advice)

    def _rank_changed(self, info: CodeInfo, line: int) -> list[Finding]:
        """``x = <…>.squeeze()`` stored ``x`` with another rank than before (a batch of one
        on a hit the op watch did not see), its input's rank unchanged as far as seen."""
        key = (info.file, line)
        if key not in self._bound:
            if len(self._bound) >= _MAX_KEYS:
                return []
            self._bound[key] = _bare_squeeze(info.source.statements.get(line))
        bound = self._bound[key]
        if bound is None or len(self._squeeze_ranks.get(key, ())) > 1:
            return []
        name, op = bound
        stats = info.stats.get(line, {}).get(name)
        if stats is None or not stats.ndim_varies:
            return []
        value = stats.ref() if stats.ref is not None else None
        if values.kind_of(value) != values.TORCH:
            return []
        ranks: dict[int, str] = {}
        for shape in stats.shapes:
            ranks.setdefault(len(shape), _shape(tuple(int(d) for d in shape)))
        advice = (
            f"without a dim it drops every dim of size 1: `{name}` was "
            + " and ".join(ranks.values())
            + " on different hits (a batch of one?); name the dim it should drop: "
            "`.squeeze(dim)`"
        )
        operand = self.facts.operand(name, value, shape_of(value))
        return self._report(info, line, op, operand, advice)

    # -- the finding -------------------------------------------------------------------
    def _operand(self, seen: CallRan, index: int, x: Any, shape: tuple[int, ...]) -> Operand:
        """The call's input as a finding's operand, named by its text in the statement."""
        statement = seen.info.source.statements.get(seen.line)
        text = _input_text(statement, seen.called.op, index) if statement is not None else None
        return self.facts.operand(text or "input", x, shape)

    def _report(
        self, info: CodeInfo, line: int, op: str, operand: Operand, advice: str
    ) -> list[Finding]:
        self._reported.add((info.file, line))
        return [
            Finding(
                kind="degenerate_op",
                severity="warning",
                file=info.file,
                line=line,
                expression=info.source.statement_text(line) or None,
                operands=(operand,),
                op=op,
                advice=advice,
            )
        ]


def _degenerate(name: str, called: Called, shape: tuple[int, ...]) -> str | None:
    """Why a normalisation or reduction of an input of ``shape`` does nothing; None when it
    does something."""
    args, kwargs = called.args, called.kwargs
    if name in _NORMALISING:
        value, instead, position, default = _NORMALISING[name]
        dims = _dims(_argument(args, kwargs, position, "dim", default), len(shape))
        if dims is None or shape[dims[0]] != 1:
            return None  # no dim: torch warns of the implicit choice (library_warning)
        return f"over dim {dims[0]}, of size 1, it is {value} and no gradient flows back; {instead}"
    keepdim = _argument(args, kwargs, 3 if name in _SPREAD else 2, "keepdim", False)
    dims = _dims(_argument(args, kwargs, 1, "dim", None), len(shape))
    if keepdim is not True or not dims or any(shape[d] != 1 for d in dims) or numel(shape) < 1:
        return None
    result = "NaN (0 with correction=0)" if name in _SPREAD else "its input, unchanged"
    listed = ", ".join(str(d) for d in dims)
    return (
        f"dim {listed} has size 1, so with keepdim=True the result is {result}: nothing "
        "was reduced; reduce over the dim you meant"
    )


def _argument(
    args: Sequence[Any], kwargs: dict[str, Any], position: int, name: str, default: Any
) -> Any:
    if name in kwargs:
        return kwargs[name]
    return args[position] if len(args) > position else default


def _dims(dim: Any, rank: int) -> tuple[int, ...] | None:
    """``dim`` (an int or a sequence of them) resolved against ``rank``; None if not dims."""
    items = dim if isinstance(dim, (tuple, list)) else (dim,)
    found = []
    for item in items:
        if not isinstance(item, int) or isinstance(item, bool) or not -rank <= item < rank:
            return None
        found.append(item % rank)
    return tuple(found) or None


def _shape(shape: tuple[int, ...]) -> str:
    return "(" + ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"


def _input_text(statement: ast.AST, op: str, index: int) -> str | None:
    """The source text of the ``index``-th call of ``op``'s input in ``statement``: the
    receiver of a method (``logits`` of ``logits.softmax(1)``), else the first argument.
    Calls are counted in the order they run (an inner call ends first)."""
    name = op.rsplit(".", 1)[-1]
    method = op.startswith("Tensor.")
    calls = []
    for node in ast.walk(statement):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
        if called != name:
            continue
        receiver = func.value if isinstance(func, ast.Attribute) else None
        is_method = receiver is not None and not _is_namespace(receiver)
        if is_method != method:
            continue
        target = receiver if is_method else (node.args[0] if node.args else None)
        if target is not None:
            calls.append((node.end_lineno or 0, node.end_col_offset or 0, target))
    calls.sort(key=lambda call: (call[0], call[1]))
    return ast.unparse(calls[index][2]) if index < len(calls) else None


def _module_call(statement: ast.AST | None, module: Any, called: Called) -> ast.Call | None:
    """The call of ``module`` in the statement (``self.softmax(scores)``)."""
    if statement is None:
        return None
    resolve = resolver(called.frame)
    for node in ast.walk(statement):
        if isinstance(node, ast.Call):
            paths = load_paths(node.func)
            if paths and resolve(paths[0]) is module:
                return node
    return None


def _is_namespace(node: ast.expr) -> bool:
    """``torch``, ``F``, ``torch.nn.functional``: where functions live, not a tensor."""
    while isinstance(node, ast.Attribute):
        if node.attr in _NOT_BOUND:
            return True
        node = node.value
    return isinstance(node, ast.Name) and node.id in _NOT_BOUND


def _bare_squeeze(statement: ast.AST | None) -> tuple[str, str] | None:
    """``x = <…>.squeeze()`` or ``x = torch.squeeze(<…>)``: (``x``, the op), else None."""
    if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
        target, value = statement.targets[0], statement.value
    elif isinstance(statement, ast.AnnAssign) and statement.value is not None:
        target, value = statement.target, statement.value
    else:
        return None
    if not isinstance(target, ast.Name) or not isinstance(value, ast.Call) or value.keywords:
        return None
    func = value.func
    if not isinstance(func, ast.Attribute) or func.attr != "squeeze":
        return None
    if not value.args and not _is_namespace(func.value):
        return target.id, "Tensor.squeeze"
    if len(value.args) == 1 and _is_namespace(func.value):
        return target.id, "torch.squeeze"
    return None
