"""A torch call that raised on a user's line, explained from the call itself.

The op watch (``findings/op_watch.py``) keeps the call that raised with its real operands,
and the module calls it was made in; :mod:`~shapelens.engine.findings.call_trials` tells
from meta copies of those operands what was wrong with them. The finding names the op
(``torch.dot``, ``Tensor.mean``, ``F.cross_entropy``, ```self.emb` (Embedding)``) and each
tensor as it was passed: its source text at the call (``targets.view(-1, 1)``), shape,
dtype, device and the line where it was born. torch's message is shown, never read.
"""

from __future__ import annotations

import ast
import sys
from dataclasses import replace
from typing import Any

from shapelens.engine.findings.call_trials import Verdict, tensors_of
from shapelens.engine.findings.chain_filters import (
    input_dim_changed,
    input_dim_of,
    joined_instead,
    what_failed,
)
from shapelens.engine.findings.context import Named, OriginOf, RunFacts, load_paths, resolver
from shapelens.engine.findings.events import CallFailed
from shapelens.engine.findings.op_names import OPERATOR_OF, name_of, op_label
from shapelens.engine.findings.op_watch import FailedCall
from shapelens.engine.findings.rules.collated_batch import CollatedBatch
from shapelens.engine.findings.rules.mismatch import (
    DeclaredAt,
    ExplainByNames,
    explain,
    fails_next,
    operand_of,
)
from shapelens.engine.recording import values
from shapelens.engine.source.segments import segment
from shapelens.engine.source.source_map import SourceMaps
from shapelens.engine.torch_support import torch_compat
from shapelens.trace.finding import CauseStep, Finding, Join, ModuleFacts, Operand

"""What a chain follows for a finding's kind (the shape otherwise)."""
MAX_CHAIN = 10
_FLOATS = ("float", "bfloat", "half", "double", "complex")
_ADVICE = {
    ("dot", "shape_mismatch"): ("torch.dot takes two 1-D tensors; use `@` or `torch.matmul`", ""),
    ("mv", "shape_mismatch"): ("torch.mv takes a matrix and a 1-D vector", ""),
    # only for the strides error: "shape '[16, 32]' is invalid for input of size 256" is a
    # wrong size, which `.reshape` refuses too
    ("view", "shape_mismatch"): (
        "`.view` needs compatible strides; `.reshape` copies if needed",
        "stride",
    ),
}
"""A sentence for calls whose fix is well known, and a word the error must hold for it to
apply: never needed for the finding to exist."""


class ExplainByCall:
    """``shape_mismatch``, ``dtype_mismatch``, ``device_mismatch``, ``op_error``: a failing
    torch call's operands, as passed, and what was wrong with them."""

    def __init__(self, facts: RunFacts, declarations: ExplainByNames) -> None:
        self.facts = facts
        self._declarations = declarations
        self._provenance = facts.provenance
        self._origin_of = facts.origin_of
        """Where the values of the call being explained were born: the run's records, or a
        replay's (its fake copies stand for the program's tensors)."""

    def explain(self, seen: CallFailed) -> list[Finding]:
        try:
            return self._explain(seen)
        except Exception:
            return []

    def _explain(self, seen: CallFailed) -> list[Finding]:
        failed, info = seen.failed, seen.info
        self._provenance = seen.provenance or self.facts.provenance
        self._origin_of = seen.origin_of or self.facts.origin_of
        verdict = failed.verdict
        statement = info.source.statements.get(seen.line)
        resolve = resolver(failed.frame, failed.inline)
        declared_at = self._declarations.declarations(info, resolve)
        batch = None
        if seen.collated is not None:  # made by a DataLoader's collate: named by sample
            batch = CollatedBatch(failed, seen.collated, statement, resolve, self.facts)
            named, op, odd_values = batch.named, batch.op, batch.odd
        else:
            call = _user_call(statement, failed, resolve) if statement is not None else None
            named, op = _passed(failed, call, info.source.lines, resolve)
            odd_values = _odd_values(failed, verdict)
        shown: list[Operand] = []
        for operand in named:
            odd = id(operand.value) in odd_values
            shown.append(operand_of(operand, self._origin_of, odd=odd, declared_at=declared_at))
        shown[:0] = _inner_module(failed, named, declared_at, self.facts, self._origin_of)
        text = str(seen.exc).strip()  # the program's error (a replay's fake one is worded apart)
        finding = Finding(
            kind=(batch.kind if batch is not None else None) or verdict.kind,
            severity="error",
            file=info.file,
            line=seen.line,
            expression=info.source.statement_text(seen.line) or None,
            operands=tuple(sorted(shown, key=lambda o: not o.odd)),
            error=text.splitlines()[0] if text else type(failed.exc).__name__,
            expected=verdict.expected,
            op=op,
            advice=_advice(failed, verdict),
        )
        if verdict.kind in ("device_mismatch", "dtype_mismatch") and verdict.odd is None:
            relevant = named
            if verdict.kind == "dtype_mismatch":  # integer indices beside floats are normal
                relevant = [n for n in named if n.is_module or str(n.dtype).startswith(_FLOATS)]
            by_majority = explain(
                verdict.kind, relevant, self._origin_of, info.file, seen.line,
                finding.error or "", declared_at=declared_at,
            )  # fmt: skip
            if by_majority is not None:
                finding = replace(
                    finding, operands=by_majority.operands, expected=by_majority.expected
                )
        finding = replace(
            finding,
            operands=tuple(self._born(o, n, batch) for o, n in _by_name(finding.operands, named)),
        )
        finding = replace(  # after the births: a step that is one is shown once
            finding, chain=self._chain(finding, batch.followed if batch is not None else named)
        )
        found = [finding]
        if verdict.kind in ("device_mismatch", "dtype_mismatch"):
            extra = fails_next(
                verdict.kind, named, self._origin_of, info.file, seen.line,
                finding.expression,
            )  # fmt: skip
            if extra is not None:
                found.append(extra)
        return found

    def _born(self, operand: Operand, named: Named | None, batch: CollatedBatch | None) -> Operand:
        """An operand no name holds (``targets.view(-1, 1)``) was born where a watched call
        made it; a sample's, else where its dataset returned it."""
        if named is not None and batch is not None and not batch.shows_birth(named.value):
            return replace(operand, file=None, line=None, born_as=None)  # the same line again
        if operand.line is not None or named is None or named.is_module:
            return operand
        made = self._provenance.made(named.value)
        if made is not None:
            return replace(operand, file=made.file, line=made.line)
        returned = batch.born.get(id(named.value)) if batch is not None else None
        if returned is None:
            return operand
        return replace(operand, file=returned[0], line=returned[1], born_as=returned[2])

    def _chain(self, finding: Finding, named: list[Named]) -> tuple[CauseStep, ...]:
        """The lines that changed what failed, for the odd operands (else every tensor)."""
        odd = {o.name for o in finding.operands if o.odd}
        followed = [n for n in named if not n.is_module and (not odd or n.label in odd)]
        changed = what_failed(finding.kind, [n.shape for n in followed])
        layers = [o for o in finding.operands if o.module is not None]
        blamed = [o.module for o in sorted(layers, key=lambda o: not o.odd) if o.module]
        data_odd = any(o.odd and o.module is None for o in finding.operands)
        wanted: tuple[int, int] | None = None  # (the dim a blamed layer reads, its size)
        if blamed and not data_odd and finding.kind == "shape_mismatch":
            # A layer built for one size and given another: follow what it was given, back
            # to where the dim it reads was set.
            followed = [n for n in named if not n.is_module]
            wanted = _wanted(blamed[0])
            changed = input_dim_changed(
                blamed[0].cls, [n.shape for n in followed], None if wanted is None else wanted[1]
            )
        steps: list[CauseStep] = []
        born = {(o.name, o.file, o.line) for o in finding.operands}
        shown: set[tuple[str, int, str | None, Any, Any]] = set()
        for operand in followed:  # a step two operands share (their common path) once
            chain = self._provenance.chain(
                operand.value, operand.label, changed, self._bound_at,
                of_shape=finding.kind not in ("dtype_mismatch", "device_mismatch"),
            )  # fmt: skip
            for step in chain:
                key = (step.file, step.line, step.op, step.before, step.after)
                if step.before is None and (operand.label, step.file, step.line) in born:
                    continue  # its birth: shown with the operand already
                if key not in shown:
                    shown.add(key)
                    steps.append(step if wanted is None else _with_join(step, *wanted))
        return tuple(steps[:MAX_CHAIN])

    def _bound_at(self, value: Any) -> tuple[str, int, str | None] | None:
        origin = self._origin_of(value)
        if origin is None:
            return None
        return (
            origin.file,
            origin.line,
            self.facts.sources.get(origin.file).statement_text(origin.line),
        )


def _wanted(layer: ModuleFacts) -> tuple[int, int] | None:
    """(the dim ``layer`` reads its size from, the size it was built for), where known."""
    dim = input_dim_of(layer.cls)
    sizes = [size for _, size in layer.expects]
    return (dim, sizes[0]) if dim is not None and len(sizes) == 1 else None


_JOINS = ("torch.cat", "torch.concat", "torch.concatenate", "torch.hstack", "torch.vstack")
"""The calls that join parts along a dim they are given (or that their name gives)."""


def _with_join(step: CauseStep, dim: int, size: int) -> CauseStep:
    """``step``, with the dim it should have joined along where it joined along another."""
    if step.op not in _JOINS or step.before is None or step.after is None:
        return step
    joined = joined_instead(step.before.shape, step.after.shape, dim, size)
    if joined is None:
        return step
    along, meant, would_be = joined
    return replace(step, join=Join(along=along, meant=meant, would_be=would_be))


def _by_name(
    operands: tuple[Operand, ...], named: list[Named]
) -> list[tuple[Operand, Named | None]]:
    by_label = {n.label: n for n in named}
    return [(o, by_label.get(o.name)) for o in operands]


def _user_call(statement: ast.AST, failed: FailedCall, resolve: Any) -> ast.AST | None:
    """The node of the statement that made the failed call: the module the user called,
    else the call or operator of the failed function's name."""
    if failed.modules:
        outer = failed.modules[-1][0]
        for node in ast.walk(statement):
            if isinstance(node, ast.Call):
                paths = load_paths(node.func)  # the whole dotted name first
                if paths and resolve(paths[0]) is outer:
                    return node
        return None
    if name_of(failed.func) == "__setitem__":  # `queue[:, i : i + n] = keys.T`
        stores = statement.targets if isinstance(statement, ast.Assign) else []
        if any(isinstance(target, ast.Subscript) for target in stores):
            return statement
    name = name_of(failed.func).removeprefix("__r").removeprefix("__").removesuffix("__")
    operator = OPERATOR_OF.get(name_of(failed.func))
    for node in ast.walk(statement):
        if operator is not None and isinstance(node, ast.BinOp) and isinstance(node.op, operator):
            return node
        if isinstance(node, ast.Call):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if called == name:
                return node
    return None


def _passed(
    failed: FailedCall, call: ast.AST | None, lines: tuple[str, ...], resolve: Any
) -> tuple[list[Named], str]:
    """The tensors (and module) the user passed, labelled with their text at the call, and
    the op's label."""

    def text(node: ast.AST) -> str:
        return " ".join((segment(lines, node) or "?").split())

    if failed.modules:
        module, arguments, by_name = failed.modules[-1]
        given: list[ast.expr] = list(call.args) if isinstance(call, ast.Call) else []
        label = text(call.func) if isinstance(call, ast.Call) else type(module).__name__
        found = [_named(label, module, module=True)]
        for keyword in call.keywords if isinstance(call, ast.Call) else ():
            if keyword.arg is not None and keyword.arg in by_name:  # model(input_ids=ids)
                written = f"{keyword.arg}={text(keyword.value)}"
                leaves = leaves_as_passed(written, by_name[keyword.arg], keyword.value, text)
                found.extend(_named(name, leaf) for name, leaf in leaves)
        for index, value in enumerate(arguments):
            node = given[index] if index < len(given) else None
            written = text(node) if node is not None else f"argument {index + 1}"
            paths = load_paths(node) if node is not None else []
            if paths and ".".join(paths[0]) == written:
                value = resolve(paths[0])  # as passed: a container's forward rebinds its input
            elif len(failed.modules) > 1:
                continue  # what a Sequential's forward holds now is not what it was given
            found.extend(
                _named(name, leaf) for name, leaf in leaves_as_passed(written, value, node, text)
            )
        return [n for n in found if n is not None], f"`{label}` ({type(module).__name__})"
    texts = _argument_texts(failed, call, text)
    tensors = tensors_of(sys.modules["torch"], failed.args, failed.kwargs)
    found = []
    for index, value in enumerate(tensors):
        name = texts.get(id(value)) or f"argument {index + 1}"
        found.append(_named(name, value))
    return [n for n in found if n is not None], op_label(failed.func)


def leaves_as_passed(
    written: str, value: Any, node: ast.expr | None, text: Any
) -> list[tuple[str, Any]]:
    """The tensors an argument holds, each named as the call passed it: itself, the
    elements of a tuple written there (``(h0, c0)``), or a container's by their path
    (``hidden[1]``, ``batch['mask']``)."""
    if isinstance(value, sys.modules["torch"].Tensor):
        return [(written, value)]
    if (
        isinstance(node, ast.Tuple | ast.List)
        and isinstance(value, tuple | list)
        and len(node.elts) == len(value)
    ):
        return [
            leaf
            for element, item in zip(node.elts, value, strict=True)
            for leaf in leaves_as_passed(text(element), item, element, text)
        ]
    if values.kind_of(value) not in values.CONTAINER_KINDS:
        return []
    try:
        leaves = torch_compat.tree_leaves_with_paths(value)
    except Exception:
        return []
    tensor = sys.modules["torch"].Tensor
    return [(written + path, leaf) for path, leaf in leaves if isinstance(leaf, tensor)][:8]


def _argument_texts(failed: FailedCall, call: ast.AST | None, text: Any) -> dict[int, str]:
    """Tensor operand (by id, or by its index among the tensors) → its text at the call."""
    nodes: list[ast.expr] = []
    if isinstance(call, ast.Assign):  # a store: the tensor stored into, its index, the value
        target = next(t for t in call.targets if isinstance(t, ast.Subscript))
        nodes = [target.value, target.slice, call.value]
    elif isinstance(call, ast.BinOp):
        nodes = [call.left, call.right]
        if name_of(failed.func).startswith("__r"):
            nodes.reverse()
    elif isinstance(call, ast.Call):
        receiver = call.func.value if isinstance(call.func, ast.Attribute) else None
        method = "Tensor" in str(getattr(failed.func, "__qualname__", ""))
        nodes = ([receiver] if method and receiver is not None else []) + list(call.args)
    out: dict[int, str] = {}
    for value, node in zip(failed.args, nodes, strict=False):
        if isinstance(node, (ast.List, ast.Tuple)) and isinstance(value, (list, tuple)):
            for item, element in zip(value, node.elts, strict=False):
                out[id(item)] = text(element)
        else:
            out[id(value)] = text(node)
    if isinstance(call, ast.Call):
        for keyword in call.keywords:
            value = failed.kwargs.get(keyword.arg or "")
            if value is not None:
                out[id(value)] = text(keyword.value)
    return out


def _named(label: str, value: Any, *, module: bool = False) -> Named | None:
    try:
        if module:
            first = next(iter(value.parameters()), None)
            if first is None:
                return None
            return Named(label, value, None, first.dtype, first.device, True)
        # A tensor, or a replay's fake copy of one (the kinds of values ignore stand-ins).
        if not isinstance(value, sys.modules["torch"].Tensor):
            return None
        return Named(label, value, tuple(value.shape), value.dtype, value.device, False)
    except Exception:
        return None


def _odd_values(failed: FailedCall, verdict: Verdict) -> set[int]:
    """ids of the operands the verdict blames (a parameter stands for its module)."""
    if verdict.odd is None:
        return set()
    tensors = tensors_of(sys.modules["torch"], failed.args, failed.kwargs)
    if verdict.odd >= len(tensors):
        return set()
    odd = tensors[verdict.odd]
    for module, _, _ in failed.modules:
        if any(parameter is odd for parameter in module.parameters()):
            return {id(module), id(failed.modules[-1][0])}
    return {id(odd)}


def _advice(failed: FailedCall, verdict: Verdict) -> str | None:
    known = _ADVICE.get((name_of(failed.func), verdict.kind))
    if known is not None and known[1] in str(failed.exc):
        return known[0]
    if verdict.on_values:
        return "it runs on tensors of these shapes, dtypes and devices: their values made it fail"
    return None


def _inner_module(
    failed: FailedCall,
    named: list[Named],
    declared_at: DeclaredAt,
    facts: RunFacts,
    origin_of: OriginOf,
) -> list[Operand]:
    """The module inside the one the user called that raised (the ``Linear`` in a
    ``Sequential``), with what it expects and its own line in the declaration, and the
    input that reached it."""
    if len(failed.modules) < 2 or not named or not named[0].is_module:
        return []
    inner, arguments, _ = failed.modules[0]
    outer = failed.modules[-1][0]
    path = next((p for p, m in outer.named_modules() if m is inner), None)
    inner_named = (
        _named(named[0].label + _attribute_path(path), inner, module=True) if path else None
    )
    if inner_named is None:
        return []
    where = declared_at(named[0].label, outer)
    line = _constructor_line(facts.sources, where, outer, inner) if where else None
    operand = operand_of(inner_named, lambda _: None, odd=True)
    if operand.module is not None:
        module = replace(operand.module, file=where[0] if where and line else None, line=line)
        operand = replace(operand, module=module)
    found = [operand]
    reached = _named(f"{inner_named.label} input", arguments[0]) if arguments else None
    if reached is not None:
        found.append(operand_of(reached, origin_of, odd=False))
    return found


def _attribute_path(path: str) -> str:
    """``layers.0.fc`` → ``.layers[0].fc`` (as the user would index it)."""
    return "".join(f"[{part}]" if part.isdigit() else f".{part}" for part in path.split("."))


def _constructor_line(
    sources: SourceMaps, where: tuple[str, int], outer: Any, inner: Any
) -> int | None:
    """The line of ``inner``'s own ``Cls(...)`` inside the statement that built ``outer``
    (the n-th ``Linear(`` of ``nn.Sequential(...)`` for the n-th Linear child)."""
    file, line = where
    cls = type(inner).__name__
    statement = sources.get(file).statements.get(line)
    if statement is None:
        return None
    same = [m for m in outer.modules() if type(m).__name__ == cls]
    index = next((i for i, m in enumerate(same) if m is inner), None)
    calls = [
        node
        for node in ast.walk(statement)
        if isinstance(node, ast.Call)
        and (getattr(node.func, "attr", None) or getattr(node.func, "id", None)) == cls
    ]
    calls.sort(key=lambda node: (node.lineno, node.col_offset))
    if index is None or index >= len(calls):
        return None
    return int(calls[index].lineno)
