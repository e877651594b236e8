"""``device_mismatch`` / ``dtype_mismatch``: explain a device or dtype error where it happened.

When user code raises one of torch's device or dtype errors, we read the tensors the
failing statement names (metadata only), find the odd one out (the minority, or the one
that disagrees with a module's parameters) and point at the line where each tensor was
born: the ``torch.zeros(6)`` that made a CPU tensor, the ``torch.from_numpy`` that made a
float64 one, the int64 mask's creation.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from shapelens.engine.findings.context import (
    Named,
    OriginOf,
    Resolve,
    RunFacts,
    load_paths,
    named_values,
    resolver,
)
from shapelens.engine.findings.events import Raised
from shapelens.engine.recording.code_info import CodeInfo
from shapelens.engine.source.source_map import declared_in_class, evaluated_on_its_line
from shapelens.engine.torch_support import torch_errors
from shapelens.lazy_regex import LazyPattern
from shapelens.trace.finding import Finding, ModuleFacts, Operand

_FLOATS = ("float", "bfloat", "half", "double", "complex")
_INDEX_CALL = LazyPattern(r"emb|cross_entropy|nll|criterion|loss|gather|index_select|one_hot")
EXPECTATIONS = {
    "Linear": ("in_features",),
    "Bilinear": ("in1_features", "in2_features"),
    "Conv1d": ("in_channels",),
    "Conv2d": ("in_channels",),
    "Conv3d": ("in_channels",),
    "ConvTranspose1d": ("in_channels",),
    "ConvTranspose2d": ("in_channels",),
    "ConvTranspose3d": ("in_channels",),
    "Embedding": ("num_embeddings", "embedding_dim"),
    "BatchNorm1d": ("num_features",),
    "BatchNorm2d": ("num_features",),
    "BatchNorm3d": ("num_features",),
    "LSTM": ("input_size",),
    "GRU": ("input_size",),
    "RNN": ("input_size",),
    "MultiheadAttention": ("embed_dim",),
    "LayerNorm": ("normalized_shape",),
    "GroupNorm": ("num_channels",),
    "InstanceNorm1d": ("num_features",),
    "InstanceNorm2d": ("num_features",),
}
"""What a module expects of its input, by class: the attributes a finding shows."""


_TORCH_ERRORS = (RuntimeError, TypeError, ValueError, IndexError)
"""What torch raises for a device, dtype or shape error."""


def mismatch_kind(
    exc: BaseException, errors: tuple[type[BaseException], ...] = _TORCH_ERRORS
) -> str | None:
    """``device_mismatch``, ``shape_mismatch``, ``dtype_mismatch`` or ``None``, as torch's
    message words it (for an exception of one of ``errors``)."""
    if not isinstance(exc, errors):
        return None
    try:
        message = str(exc)
    except Exception:
        return None
    if torch_errors.DEVICE_ERROR.search(message):
        return "device_mismatch"
    if torch_errors.SHAPE_ERROR.search(message):
        return "shape_mismatch"
    if torch_errors.DTYPE_ERROR.search(message):
        return "dtype_mismatch"
    return None


def devices_disagree(operands: list[Named]) -> str | None:
    """``device_mismatch`` when the statement's tensors sit on different devices, whatever
    torch's message says (its wording changes between versions: fake tensors on torch 2.4
    say "Unhandled FakeTensor Device Propagation"). 0-dim CPU tensors mix with any device."""
    devices = {str(o.device) for o in operands if o.device is not None and (o.is_module or o.shape)}
    return "device_mismatch" if len(devices) > 1 else None


DeclaredAt = Callable[[str, Any], "tuple[str, int] | None"]
"""(operand label, module value) → (file, line) of the statement that declared it."""


class ExplainByNames:
    """``device_mismatch``, ``dtype_mismatch``, ``shape_mismatch``: torch's error explained
    by the tensors the failing statement names (when the failing call was not seen)."""

    def __init__(self, facts: RunFacts) -> None:
        self.facts = facts

    def explain(self, seen: Raised) -> list[Finding]:
        info = seen.info
        statement = info.source.statements.get(seen.line)
        if statement is None or not isinstance(seen.exc, _TORCH_ERRORS):
            return []
        try:
            resolve = resolver(seen.frame)
            operands: list[Named] = []
            for part in evaluated_on_its_line(statement):  # a loop's line: not its body's names
                known = {id(n.value) for n in operands}
                operands += [n for n in named_values(part, resolve) if id(n.value) not in known]
            kind = mismatch_kind(seen.exc) or devices_disagree(operands)
            if kind is None:
                return []
            text = str(seen.exc).strip()
            return explain_all(
                kind,
                operands,
                self.facts.origin_of,
                info.file,
                seen.line,
                text.splitlines()[0] if text else type(seen.exc).__name__,
                statement=statement,
                declared_at=self.declarations(info, resolve),
                expression=info.source.statement_text(seen.line) or None,
            )
        except Exception:
            return []

    def declarations(self, info: CodeInfo, resolve: Resolve) -> DeclaredAt:
        """Where a module operand was declared: ``self.fc = nn.Linear(...)`` in its owner's
        class, or ``model = ...`` in this file."""

        def declared_at(label: str, module: Any) -> tuple[str, int] | None:
            *owner_path, name = label.split(".")
            if not owner_path:
                found = info.source.assignment_line(name, on_self=False)
                return (info.file, found) if found is not None else None
            owner = resolve(tuple(owner_path))
            return declared_in_class(self.facts.sources, self.facts.scope, owner, name)

        return declared_at


def operand_of(
    named: Named, origin_of: OriginOf, *, odd: bool, declared_at: DeclaredAt | None = None
) -> Operand:
    """The operand of a finding, with the line where its value was born (a module: what it
    expects and where it was declared)."""
    shape = None if named.shape is None else tuple(int(d) for d in named.shape)
    if named.is_module:
        cls = type(named.value).__name__
        table = getattr(named.value, "__dict__", {})
        expects = tuple(
            (name, size)
            for name in EXPECTATIONS.get(cls, ())
            if (size := _size_expected(table.get(name))) is not None
        )
        where = declared_at(named.label, named.value) if declared_at is not None else None
        module = ModuleFacts(
            cls=cls,
            expects=expects,
            file=where[0] if where else None,
            line=where[1] if where else None,
        )
        return Operand(
            name=named.label, shape=shape, dtype=named.dtype, device=named.device, odd=odd,
            module=module,
        )  # fmt: skip
    origin = origin_of(named.value)
    return Operand(
        name=named.label,
        shape=shape,
        dtype=named.dtype,
        device=named.device,
        requires_grad=getattr(named.value, "requires_grad", None),
        file=None if origin is None else origin.file,
        line=None if origin is None else origin.line,
        passed_in=origin is not None and origin.is_argument,
        born_as=origin.name if origin is not None and origin.name != named.label else None,
        odd=odd,
    )


def _size_expected(value: Any) -> int | None:
    """A module's expected size: an int, or a ``LayerNorm``'s one normalized dim ``(96,)``."""
    if isinstance(value, tuple) and len(value) == 1:
        value = value[0]
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def explain_all(
    kind: str,
    operands: list[Named],
    origin_of: OriginOf,
    file: str,
    line: int,
    error: str,
    *,
    statement: ast.AST | None = None,
    declared_at: DeclaredAt | None = None,
    expression: str | None = None,
) -> list[Finding]:
    """The finding for the error that happened, plus a warning for the other attribute when
    the operands disagree on it too (the seed's mask was both int64 and on another device:
    the user should learn both at once, not one run at a time)."""
    if kind == "shape_mismatch":
        shown = tuple(
            operand_of(o, origin_of, odd=False, declared_at=declared_at) for o in operands
        )
        return [
            Finding(
                kind=kind, severity="error", file=file, line=line, expression=expression,
                operands=shown, error=error,
            )
        ]  # fmt: skip
    found = []
    main = None
    if kind == "dtype_mismatch" and torch_errors.WANTS_BOOL_ERROR.search(error):
        main = _wrong_kind(operands, origin_of, file, line, error, "bool", _is_integer, declared_at)
    elif kind == "dtype_mismatch" and torch_errors.WANTS_INTEGER_ERROR.search(error):
        main = _float_indices(operands, origin_of, file, line, error, statement, declared_at)
    if main is None:
        main = explain(kind, operands, origin_of, file, line, error, declared_at=declared_at)
    if main is not None:
        found.append(replace(main, expression=expression))
    extra = fails_next(kind, operands, origin_of, file, line, expression)
    if extra is not None:
        found.append(extra)
    return found


def fails_next(
    kind: str,
    operands: list[Named],
    origin_of: OriginOf,
    file: str,
    line: int,
    expression: str | None,
) -> Finding | None:
    """A warning when the operands of a device (dtype) error disagree on their dtype
    (device) too: what fails once the error is fixed."""
    other = "dtype_mismatch" if kind == "device_mismatch" else "device_mismatch"
    if other == "device_mismatch":
        # 0-dim CPU tensors mix with any device: they don't count for a device disagreement.
        relevant = [o for o in operands if o.is_module or o.shape]
    else:
        # Integer targets and indices beside float values are normal; two float dtypes
        # (float32 weights, float64 numpy data) are what fails next.
        relevant = [o for o in operands if o.is_module or str(o.dtype).startswith(_FLOATS)]
    extra = explain(other, relevant, origin_of, file, line, "this fails next")
    if extra is None:
        return None
    return replace(extra, severity="warning", error=None, expression=expression)


def _is_integer(operand: Named) -> bool:
    return str(operand.dtype).startswith(("int", "uint"))


def _wrong_kind(
    operands: list[Named],
    origin_of: OriginOf,
    file: str,
    line: int,
    error: str,
    expected: str,
    wrong: Callable[[Named], bool],
    declared_at: DeclaredAt | None,
) -> Finding | None:
    """An operand of the wrong kind of dtype (an int64 mask where torch wants bool)."""
    odd = [o for o in operands if not o.is_module and wrong(o)]
    if not odd:
        return None
    rest = [o for o in operands if o not in odd]
    return _odd_first(
        "dtype_mismatch", file, line, odd, rest, origin_of, declared_at, error, expected
    )


def _float_indices(
    operands: list[Named],
    origin_of: OriginOf,
    file: str,
    line: int,
    error: str,
    statement: ast.AST | None,
    declared_at: DeclaredAt | None,
) -> Finding | None:
    """Float token ids reaching an Embedding, float targets reaching cross_entropy: every
    operand shares the dtype, so no minority tells; the index argument is the odd one."""
    floats = [
        o for o in operands if not o.is_module and str(o.dtype).startswith(("float", "bfloat"))
    ]
    index = _index_argument(statement) if statement is not None else None
    odd = [o for o in floats if o.label == index] or floats
    return _wrong_kind(
        operands, origin_of, file, line, error, "int64", lambda o: o in odd, declared_at
    )


def _index_argument(statement: ast.AST) -> str | None:
    """The argument that must hold integers: the last positional argument of an embedding,
    a loss or a gather call (``self.wte(idx)``, ``F.cross_entropy(logits, targets)``)."""
    for node in ast.walk(statement):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if _INDEX_CALL.search(name.lower()):
            target = next((k.value for k in node.keywords if k.arg in ("target", "index")), None)
            parts = load_paths(target if target is not None else node.args[-1])
            if parts:
                return ".".join(parts[0])
    return None


def explain(
    kind: str,
    operands: list[Named],
    origin_of: OriginOf,
    file: str,
    line: int,
    error: str,
    *,
    declared_at: DeclaredAt | None = None,
) -> Finding | None:
    """The finding, or ``None`` when the statement names no disagreeing tensors. The odd
    operands come first, each with the line where it was born."""
    attribute = "device" if kind == "device_mismatch" else "dtype"
    groups: dict[str | None, list[Named]] = {}
    for operand in operands:
        groups.setdefault(getattr(operand, attribute), []).append(operand)
    if len(groups) < 2:
        return None
    module_values = [getattr(o, attribute) for o in operands if o.is_module]
    # A module's parameters set the expectation; otherwise the majority does.
    reference = module_values[0] if module_values else max(groups, key=lambda k: len(groups[k]))
    odd = [o for o in operands if getattr(o, attribute) != reference]
    rest = [o for o in operands if getattr(o, attribute) == reference]
    return _odd_first(kind, file, line, odd, rest, origin_of, declared_at, error, str(reference))


def _odd_first(
    kind: str,
    file: str,
    line: int,
    odd: list[Named],
    rest: list[Named],
    origin_of: OriginOf,
    declared_at: DeclaredAt | None,
    error: str,
    expected: str,
) -> Finding:
    """A mismatch finding: the odd operands first, each with where it was born."""
    operands = tuple(
        operand_of(o, origin_of, odd=o in odd, declared_at=declared_at) for o in odd + rest
    )
    return Finding(
        kind=kind,
        severity="error",
        file=file,
        line=line,
        operands=operands,
        error=error,
        expected=expected,
    )
