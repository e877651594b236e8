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
from shapelens.engine.findings.shapes import fmt
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


def mismatch_kind(exc: BaseException) -> str | None:
    """``device_mismatch``, ``dtype_mismatch`` or ``None`` for this exception."""
    if not isinstance(exc, (RuntimeError, TypeError, ValueError)):
        return None
    try:
        message = str(exc)
    except Exception:
        return None
    if _DEVICE_ERROR.search(message):
        return "device_mismatch"
    if _DTYPE_ERROR.search(message):
        return "dtype_mismatch"
    return None


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

    def describe(self) -> str:
        what = "parameters" if self.is_module else fmt(tuple(self.shape or ()))
        return f"`{self.label}` {what} {self.dtype} {self.device}"


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
) -> list[dict[str, Any]]:
    """The finding for the error that happened, plus a warning for the other attribute when
    the operands disagree on it too (the seed's mask was both int64 and on another device:
    the user should learn both at once, not one run at a time)."""
    found = []
    main = explain(kind, operands, origin_of, file, line, error)
    if main is not None:
        found.append(main)
    other = "dtype_mismatch" if kind == "device_mismatch" else "device_mismatch"
    # 0-dim CPU tensors mix with any device, so they don't count for a device disagreement.
    relevant = [o for o in operands if other != "device_mismatch" or o.is_module or o.shape]
    extra = explain(other, relevant, origin_of, file, line, "this fails next")
    if extra is not None:
        extra["severity"] = "warning"
        found.append(extra)
    return found


def explain(
    kind: str,
    operands: list[Operand],
    origin_of: Callable[[Any], VarStats | None],
    file: str,
    line: int,
    error: str,
) -> dict[str, Any] | None:
    """Build the finding, or ``None`` when the statement names no disagreeing tensors."""
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
    noun = "device" if attribute == "device" else "dtype"
    verb = "is on" if attribute == "device" else "is"
    message = (
        f"{noun} mismatch: "
        + ", ".join(o.describe() for o in odd)
        + f" {verb} {getattr(odd[0], attribute)}, but "
        + ", ".join(f"`{o.label}`" for o in rest)
        + (" are" if len(rest) > 1 else " is")
        + (" on " if attribute == "device" else " ")
        + str(reference)
        + f" ({error})"
    )
    related: list[dict[str, Any]] = []
    for operand in odd + rest:
        if operand.is_module:
            continue
        origin = origin_of(operand.value)
        if origin is None:
            continue
        where = "passed in" if origin.is_argument else "created"
        alias = "" if origin.name == operand.label else f" as `{origin.name}`"
        related.append(
            {
                "file": origin.file,
                "line": origin.line,
                "message": f"`{operand.label}` {where} here{alias}: "
                f"{fmt(tuple(operand.shape or ()))} {operand.dtype} {operand.device}"
                + ("" if operand in rest else f" (the odd {noun})"),
            }
        )
    return {
        "kind": kind,
        "severity": "error",
        "file": file,
        "line": line,
        "message": message,
        "related": related,
    }
