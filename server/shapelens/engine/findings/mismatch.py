"""``device_mismatch`` / ``dtype_mismatch``: explain a device or dtype error where it happened.

When user code raises one of torch's device or dtype errors, we read the tensors the
failing statement names (metadata only), find the odd one out (the minority, or the one
that disagrees with a module's parameters) and point at the line where each tensor was
born: the ``torch.zeros(6)`` that made a CPU tensor, the ``torch.from_numpy`` that made a
float64 one, the int64 mask's creation.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from typing import Any

from shapelens.engine import values
from shapelens.engine.recorder import VarStats

_DEVICE_ERROR = re.compile(
    r"same device|two devices|expected device|not on the expected device|backend (cpu|cuda)"
    r"|device type|on device \w+",
    re.IGNORECASE,
)
_DTYPE_ERROR = re.compile(
    r"dtype|scalar type|must be bool|boolean mask|same type"
    r"|expected .* but got .*(float|double|long|int|half)",
    re.IGNORECASE,
)


_SHAPE_ERROR = re.compile(
    r"shapes cannot be multiplied|size mismatch|is invalid for input of size"
    r"|sizes of tensors must match|must match the size of tensor|to have \d+ channels"
    r"|expected input batch_size|multi-target not supported|expects each tensor to be equal size"
    r"|view size is not compatible|inconsistent tensor size|expected target size"
    r"|expected \d+D .*input|mat1 dim 1 must match|dimension out of range"
    r"|target size .* different to the input size",
    re.IGNORECASE,
)
_FLOATS = ("float", "bfloat", "half", "double", "complex")
_WANTS_BOOL = re.compile(r"boolean mask|must be bool|bool(ean)? (tensor|dtype)|supports boolean")
_WANTS_INTEGER = re.compile(r"\b(Long|Int)\b|int64|indices", re.IGNORECASE)
_INDEX_CALL = re.compile(r"emb|cross_entropy|nll|criterion|loss|gather|index_select|one_hot")
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
}
"""What a module expects of its input, by class: the attributes a finding shows."""


def mismatch_kind(exc: BaseException) -> str | None:
    """``device_mismatch``, ``shape_mismatch``, ``dtype_mismatch`` or ``None``."""
    if not isinstance(exc, (RuntimeError, TypeError, ValueError, IndexError)):
        return None
    try:
        message = str(exc)
    except Exception:
        return None
    if _DEVICE_ERROR.search(message):
        return "device_mismatch"
    if _SHAPE_ERROR.search(message):
        return "shape_mismatch"
    if _DTYPE_ERROR.search(message):
        return "dtype_mismatch"
    return None


DeclaredAt = Callable[[str, Any], "tuple[str, int] | None"]
"""(operand label, module value) → (file, line) of the statement that declared it."""


class Operand:
    __slots__ = ("device", "dtype", "is_module", "label", "shape", "value")

    def __init__(
        self, label: str, value: Any, shape: Any, dtype: Any, device: Any, is_module: bool
    ) -> None:
        self.label = label
        self.value = value
        self.shape = shape
        self.dtype = values.dtype_name(dtype)
        self.device = values.device_name(device)
        self.is_module = is_module

    def to_data(
        self,
        origin_of: Callable[[Any], VarStats | None],
        *,
        odd: bool,
        declared_at: DeclaredAt | None = None,
    ) -> dict[str, Any]:
        """The operand as trace data, with the line where its value was born."""
        data: dict[str, Any] = {
            "name": self.label,
            "shape": None if self.shape is None else [int(d) for d in self.shape],
            "dtype": self.dtype,
            "device": self.device,
            "requires_grad": None,
            "line": None,
            "odd": odd,
        }
        if self.is_module:
            cls = type(self.value).__name__
            table = getattr(self.value, "__dict__", {})
            expects = {
                name: table[name]
                for name in EXPECTATIONS.get(cls, ())
                if isinstance(table.get(name), int)
            }
            where = declared_at(self.label, self.value) if declared_at is not None else None
            data["module"] = {
                "class": cls,
                "expects": expects,
                "file": where[0] if where else None,
                "line": where[1] if where else None,
            }
            return data
        data["requires_grad"] = getattr(self.value, "requires_grad", None)
        origin = origin_of(self.value)
        if origin is not None:
            data.update(file=origin.file, line=origin.line, passed_in=origin.is_argument)
            if origin.name != self.label:
                data["born_as"] = origin.name
        return data


def _paths(statement: ast.AST) -> list[tuple[str, ...]]:
    found: dict[tuple[str, ...], None] = {}
    for node in ast.walk(statement):
        parts: list[str] = []
        current: ast.AST = node
        if not isinstance(node, (ast.Name, ast.Attribute)):
            continue
        while isinstance(current, ast.Attribute):
            parts.append(current.attr)
            current = current.value
        if isinstance(current, ast.Name) and isinstance(getattr(node, "ctx", None), ast.Load):
            parts.append(current.id)
            found[tuple(reversed(parts))] = None
    return list(found)


def _operand(label: str, value: Any) -> Operand | None:
    try:
        kind = values.kind_of(value)
        if kind in (values.TORCH, values.ARRAY):
            return Operand(
                label,
                value,
                getattr(value, "shape", None),
                value.dtype,
                getattr(value, "device", None),
                False,
            )
        table = getattr(value, "__dict__", None)
        if isinstance(table, dict) and "_parameters" in table and hasattr(value, "parameters"):
            first = next(iter(value.parameters()), None)
            if first is not None:
                return Operand(label, value, None, first.dtype, first.device, True)
    except Exception:
        return None
    return None


def operands_of(statement: ast.AST, resolve: Callable[[tuple[str, ...]], Any]) -> list[Operand]:
    seen: set[int] = set()
    found: list[Operand] = []
    for path in _paths(statement):
        value = resolve(path)
        if value is None or id(value) in seen:
            continue
        operand = _operand(".".join(path), value)
        if operand is not None:
            seen.add(id(value))
            found.append(operand)
    # `self.fc(x)` names both `self` and `self.fc`: the submodule is the one that ran.
    modules = [o.label for o in found if o.is_module]
    return [
        o for o in found if not (o.is_module and any(m.startswith(o.label + ".") for m in modules))
    ]


def explain_all(
    kind: str,
    operands: list[Operand],
    origin_of: Callable[[Any], VarStats | None],
    file: str,
    line: int,
    error: str,
    *,
    statement: ast.AST | None = None,
    declared_at: DeclaredAt | None = None,
    expression: str | None = None,
) -> list[dict[str, Any]]:
    """The finding for the error that happened, plus a warning for the other attribute when
    the operands disagree on it too (the seed's mask was both int64 and on another device:
    the user should learn both at once, not one run at a time)."""
    if kind == "shape_mismatch":
        return [
            {
                "kind": kind,
                "severity": "error",
                "file": file,
                "line": line,
                "expression": expression,
                "operands": [
                    o.to_data(origin_of, odd=False, declared_at=declared_at) for o in operands
                ],
                "error": error,
            }
        ]
    found = []
    main = None
    if kind == "dtype_mismatch" and _WANTS_BOOL.search(error):
        main = _wrong_kind(operands, origin_of, file, line, error, "bool", _is_integer, declared_at)
    elif kind == "dtype_mismatch" and _WANTS_INTEGER.search(error):
        main = _float_indices(operands, origin_of, file, line, error, statement, declared_at)
    if main is None:
        main = explain(kind, operands, origin_of, file, line, error, declared_at=declared_at)
    if main is not None:
        main["expression"] = expression
        found.append(main)
    other = "dtype_mismatch" if kind == "device_mismatch" else "device_mismatch"
    if other == "device_mismatch":
        # 0-dim CPU tensors mix with any device: they don't count for a device disagreement.
        relevant = [o for o in operands if o.is_module or o.shape]
    else:
        # Integer targets and indices beside float values are normal; two float dtypes
        # (float32 weights, float64 numpy data) are what fails next.
        relevant = [o for o in operands if o.is_module or str(o.dtype).startswith(_FLOATS)]
    extra = explain(other, relevant, origin_of, file, line, "this fails next")
    if extra is not None:
        extra.update(severity="warning", error=None, expression=expression)
        found.append(extra)
    return found


def _is_integer(operand: Operand) -> bool:
    return str(operand.dtype).startswith(("int", "uint"))


def _wrong_kind(
    operands: list[Operand],
    origin_of: Callable[[Any], VarStats | None],
    file: str,
    line: int,
    error: str,
    expected: str,
    wrong: Callable[[Operand], bool],
    declared_at: DeclaredAt | None,
) -> dict[str, Any] | None:
    """An operand of the wrong kind of dtype (an int64 mask where torch wants bool)."""
    odd = [o for o in operands if not o.is_module and wrong(o)]
    if not odd:
        return None
    rest = [o for o in operands if o not in odd]
    return {
        "kind": "dtype_mismatch",
        "severity": "error",
        "file": file,
        "line": line,
        "operands": [
            o.to_data(origin_of, odd=o in odd, declared_at=declared_at) for o in odd + rest
        ],
        "error": error,
        "expected": expected,
    }


def _float_indices(
    operands: list[Operand],
    origin_of: Callable[[Any], VarStats | None],
    file: str,
    line: int,
    error: str,
    statement: ast.AST | None,
    declared_at: DeclaredAt | None,
) -> dict[str, Any] | None:
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
            parts = _paths(target if target is not None else node.args[-1])
            if parts:
                return ".".join(parts[0])
    return None


def explain(
    kind: str,
    operands: list[Operand],
    origin_of: Callable[[Any], VarStats | None],
    file: str,
    line: int,
    error: str,
    *,
    declared_at: DeclaredAt | None = None,
) -> dict[str, Any] | None:
    """The finding (as trace data), or ``None`` when the statement names no disagreeing
    tensors. The odd operands come first, each with the line where it was born."""
    attribute = "device" if kind == "device_mismatch" else "dtype"
    groups: dict[str | None, list[Operand]] = {}
    for operand in operands:
        groups.setdefault(getattr(operand, attribute), []).append(operand)
    if len(groups) < 2:
        return None
    module_values = [getattr(o, attribute) for o in operands if o.is_module]
    # A module's parameters set the expectation; otherwise the majority does.
    reference = module_values[0] if module_values else max(groups, key=lambda k: len(groups[k]))
    odd = [o for o in operands if getattr(o, attribute) != reference]
    rest = [o for o in operands if getattr(o, attribute) == reference]
    return {
        "kind": kind,
        "severity": "error",
        "file": file,
        "line": line,
        "expression": None,
        "operands": [
            o.to_data(origin_of, odd=o in odd, declared_at=declared_at) for o in odd + rest
        ],
        "error": error,
        "expected": str(reference),
    }
