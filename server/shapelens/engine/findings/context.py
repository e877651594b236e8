"""What every rule may ask of the running program: the values a statement names, where a
value was born, and a value as a finding's operand. Reads only: no user code runs
(attributes through ``values.safe_attribute``), and nothing here raises into the program."""

from __future__ import annotations

import ast
import builtins
from collections.abc import Callable
from dataclasses import replace
from types import FrameType
from typing import Any, NamedTuple, Protocol

from shapelens.engine.findings.nonfinite_scan import NonfiniteScan
from shapelens.engine.findings.provenance import Provenance
from shapelens.engine.recording import values
from shapelens.engine.recording.code_info import CodeInfo
from shapelens.engine.recording.scope import UserCodeScope
from shapelens.engine.source.source_map import SourceMaps
from shapelens.engine.torch_support import torch_compat
from shapelens.settings.groups import FindingsConfig
from shapelens.trace.finding import Operand

_MISSING = object()
MAX_INPUTS = 6
"""A statement's inputs shown with a finding about its result (the first ones)."""

Resolve = Callable[[tuple[str, ...]], Any]
"""``("self", "fc")`` → the value ``self.fc`` holds in a frame, or None."""


class Birth(Protocol):
    """Where a value was born: a run's record (:class:`VarStats`), or a replay's guess."""

    @property
    def file(self) -> str: ...
    @property
    def line(self) -> int: ...
    @property
    def name(self) -> str: ...
    @property
    def is_argument(self) -> bool: ...


OriginOf = Callable[[Any], "Birth | None"]
HitsOf = Callable[[str, int], int]
"""(file, line) → the line's hits so far."""
DEFAULT_MAX_ELEMENTS = FindingsConfig().nonfinite_max_elements


class Origin(NamedTuple):
    """The call that made the first non-finite value, on its user line."""

    info: CodeInfo
    line: int
    op: Any
    inputs: list[Any]
    result: Any
    state: str
    nth: int = 0
    """How many calls of the same op the line made directly before this one (which of its
    two ``torch.log`` calls it was)."""


class FindsOrigins(Protocol):
    """Where a statement's calls first made a non-finite value (:mod:`.nonfinite_origin`)."""

    def find(self, frame: FrameType, info: CodeInfo, line: int) -> Origin | None: ...


class RunFacts:
    """What the rules of one run share: where values were born (the run's records), where
    results of torch calls came from (``provenance``), the program's sources, which code is
    the user's, and the bounded NaN/Inf scan of the findings settings."""

    def __init__(
        self,
        origin_of: OriginOf,
        sources: SourceMaps,
        scope: UserCodeScope,
        *,
        provenance: Provenance | None = None,
        scan: NonfiniteScan | None = None,
        hits_of: HitsOf | None = None,
    ) -> None:
        self.origin_of = origin_of
        self.hits_of = hits_of
        """A line's hits so far, extrapolated where its events are switched off (3.12+)."""
        self.sources = sources
        self.scope = scope
        self.provenance = provenance or Provenance()
        self.scan = scan or NonfiniteScan(DEFAULT_MAX_ELEMENTS, on_gpu=False)
        self.origins: FindsOrigins | None = None
        """Where a statement's calls first made a non-finite value (the engine's choice)."""

    def operand(self, name: str, value: Any, shape: tuple[int, ...] | None) -> Operand:
        """``value`` as a finding's operand: its metadata and where it was born."""
        try:
            dtype = values.dtype_name(getattr(value, "dtype", None))
            device = values.device_name(getattr(value, "device", None))
            requires_grad = getattr(value, "requires_grad", None)
        except Exception:
            return Operand(name=name, shape=shape)
        operand = Operand(
            name=name, shape=shape, dtype=dtype, device=device, requires_grad=requires_grad
        )
        origin = self.origin_of(value) if shape_of(value) not in (None, ()) else None
        if origin is None:
            return operand
        return replace(
            operand,
            file=origin.file,
            line=origin.line,
            passed_in=origin.is_argument,
            born_as=origin.name if origin.name != name else None,
        )

    def operands(self, named: list[tuple[str, Any]]) -> tuple[Operand, ...]:
        """Values a finding shows beside its subject (a number's shape is ``()``)."""
        return tuple(self.operand(name, value, shape_of(value) or ()) for name, value in named)


def inputs_of(frame: FrameType, info: CodeInfo, line: int, value: Any) -> list[tuple[str, Any]]:
    """The tensors statement ``line`` of ``frame`` names (other than its result ``value``),
    as they are now: (label, value)."""
    statement = info.source.statements.get(line)
    if statement is None:
        return []
    try:
        found = named_values(statement, resolver(frame))
    except Exception:
        return []
    return [(o.label, o.value) for o in found if not o.is_module and o.value is not value][
        :MAX_INPUTS
    ]


def resolver(frame: FrameType, inline: tuple[FrameType, ...] = ()) -> Resolve:
    """Dotted names read in ``frame``: the locals of the ``inline`` frames it runs (a
    comprehension's, innermost first), its locals, then its globals, then the builtins."""
    scopes = [*(f.f_locals for f in inline), frame.f_locals]
    globals_ = frame.f_globals

    def resolve(path: tuple[str, ...]) -> Any:
        head = path[0]
        value = _MISSING
        for scope in scopes:
            value = scope.get(head, _MISSING)
            if value is not _MISSING:
                break
        if value is _MISSING:
            value = globals_.get(head, _MISSING)
        if value is _MISSING:
            value = getattr(builtins, head, None)
        for attr in path[1:]:
            if value is None:
                return None
            value = values.safe_attribute(value, attr)
        return value

    return resolve


def shape_of(value: Any) -> tuple[int, ...] | None:
    """The shape of a tensor or array, ``()`` for a Python number, else None."""
    if isinstance(value, (int, float, complex)):
        return ()
    kind = values.kind_of(value)
    if kind in (values.TORCH, values.ARRAY):
        try:
            return tuple(int(d) for d in value.shape)
        except Exception:
            return None
    return None


class Named:
    """A tensor, array or module a statement names, with its metadata."""

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


def load_paths(statement: ast.AST) -> list[tuple[str, ...]]:
    """The dotted names (``self.fc.weight``) ``statement`` reads, in order."""
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


def _named(label: str, value: Any) -> Named | None:
    try:
        kind = values.kind_of(value)
        if kind in (values.TORCH, values.ARRAY):
            return Named(
                label,
                value,
                getattr(value, "shape", None),
                value.dtype,
                getattr(value, "device", None),
                False,
            )
        table = getattr(value, "__dict__", None)
        if (
            isinstance(table, dict)
            and torch_compat.is_module_state(table)
            and hasattr(value, "parameters")
        ):
            first = next(iter(value.parameters()), None)
            if first is not None:
                return Named(label, value, None, first.dtype, first.device, True)
    except Exception:
        return None
    return None


def named_values(statement: ast.AST, resolve: Resolve) -> list[Named]:
    """The tensors, arrays and modules ``statement`` names, each once."""
    seen: set[int] = set()
    found: list[Named] = []
    for path in load_paths(statement):
        value = resolve(path)
        if value is None or id(value) in seen:
            continue
        named = _named(".".join(path), value)
        if named is not None:
            seen.add(id(value))
            found.append(named)
    # `self.fc(x)` names both `self` and `self.fc`: the submodule is the one that ran.
    modules = [o.label for o in found if o.is_module]
    return [
        o for o in found if not (o.is_module and any(m.startswith(o.label + ".") for m in modules))
    ]
