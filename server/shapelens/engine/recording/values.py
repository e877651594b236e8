"""What kind of value a variable holds, decided once per type and read without ``repr``.

Tensors are recognised duck-typed: a ``torch.Tensor`` (only if the user's code imported
torch), or any object whose type has ``shape`` and ``dtype`` (numpy arrays, jax arrays,
...). Containers are flattened into named entries (``batch['x']``, ``pair[1]``,
``out.values``). Nothing here calls ``repr``/``str`` on a value or touches its data.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable, Iterator
from typing import Any

from shapelens.engine.torch_support import simulated_values, torch_compat

IGNORED = 0
TORCH = 1
ARRAY = 2
SEQUENCE = 3
NAMED_TUPLE = 4
MAPPING = 5
DATACLASS = 6
NUMBER = 7
"""A Python int, float or bool bound to a name: its value is shown (``B=4``, ``i 0‥999``)."""

CONTAINER_KINDS = frozenset({SEQUENCE, NAMED_TUPLE, MAPPING, DATACLASS})
MAX_CONTAINER_ITEMS = 8
MAX_CONTAINER_DEPTH = 2

_ALWAYS_IGNORED: tuple[type, ...] = (
    type(None),
    complex,
    str,
    bytes,
    bytearray,
    range,
    type,
    type(len),
    type(sys),
    type(lambda: 0),
    set,
    frozenset,
    slice,
)

kind_of_type: dict[type, int] = dict.fromkeys(_ALWAYS_IGNORED, IGNORED)
kind_of_type.update(dict.fromkeys((bool, int, float, *simulated_values.TYPE_NAMES), NUMBER))


SHARDED_TYPES: set[type] = set()
"""Tensor types of which each rank holds a shard (DTensor): read with their placements."""


def _torch_tensor_type() -> type | None:
    torch = sys.modules.get("torch")
    return getattr(torch, "Tensor", None) if torch is not None else None


def classify(value: Any) -> int:
    """Decide the kind of ``type(value)`` and cache it. Never raises."""
    tp = type(value)
    try:
        kind = _classify(value, tp)
    except Exception:
        kind = IGNORED
    kind_of_type[tp] = kind
    return kind


def _classify(value: Any, tp: type) -> int:
    tensor_type = _torch_tensor_type()
    if tensor_type is not None and issubclass(tp, tensor_type):
        # FakeTensor, FunctionalTensor: stand-ins while torch.compile/export trace user code
        # (an allow_in_graph function, a custom op's fake kernel). No data, symbolic shapes
        # whose every comparison would add a guard to their graph: not the user's values.
        if torch_compat.is_stand_in(tp):
            return IGNORED
        if torch_compat.is_sharded_type(tp):
            SHARDED_TYPES.add(tp)
        return TORCH
    if tp is list or tp is tuple:
        return SEQUENCE
    if issubclass(tp, tuple) and (hasattr(tp, "_fields") or hasattr(tp, "n_fields")):
        return NAMED_TUPLE
    if issubclass(tp, dict):
        return MAPPING
    if issubclass(tp, (list, tuple)):
        return SEQUENCE
    if hasattr(tp, "shape") and hasattr(tp, "dtype"):
        return ARRAY
    if dataclasses.is_dataclass(tp):
        return DATACLASS
    return IGNORED


def kind_of(value: Any) -> int:
    kind = kind_of_type.get(type(value))
    return classify(value) if kind is None else kind


def type_name(tp: type) -> str:
    simulated = simulated_values.TYPE_NAMES.get(tp)
    if simulated is not None:
        return simulated  # a shape-only run's stand-in: never shown as a real value
    module = tp.__module__
    if module == "builtins":
        return tp.__qualname__
    if module == "torch" and tp.__qualname__ == "Tensor":
        return "torch.Tensor"
    return f"{module}.{tp.__qualname__}"


def field_names(tp: type) -> tuple[str, ...]:
    """Field names of a namedtuple or a structseq such as ``torch.return_types.aminmax``."""
    names = getattr(tp, "_fields", None) or getattr(tp, "__match_args__", None) or ()
    return tuple(str(n) for n in names)


def container_entries(name: str, value: Any, kind: int) -> Iterator[tuple[str, Any]]:
    """Named entries of a container, bounded in count. Never raises on odd containers."""
    try:
        if kind == SEQUENCE:
            for index, item in enumerate(value[:MAX_CONTAINER_ITEMS]):
                yield f"{name}[{index}]", item
        elif kind == NAMED_TUPLE:
            names = field_names(type(value))
            for index, item in enumerate(tuple.__iter__(value)):
                if index >= MAX_CONTAINER_ITEMS:
                    break
                label = names[index] if index < len(names) else str(index)
                yield f"{name}.{label}", item
        elif kind == MAPPING:
            for count, (key, item) in enumerate(dict.items(value)):
                if count >= MAX_CONTAINER_ITEMS:
                    break
                if isinstance(key, (str, int)):
                    yield f"{name}[{key!r}]", item
        elif kind == DATACLASS:
            for count, fld in enumerate(dataclasses.fields(value)):
                if count >= MAX_CONTAINER_ITEMS:
                    break
                item = value.__dict__.get(fld.name) if hasattr(value, "__dict__") else None
                if item is not None:
                    yield f"{name}.{fld.name}", item
    except Exception:
        return


def safe_attribute(obj: Any, attr: str) -> Any:
    """``obj.attr`` without running properties or ``__getattr__`` user code.

    Looks in the instance ``__dict__`` and in ``nn.Module``'s parameter, buffer and
    submodule tables; returns ``None`` when the attribute is not found there.
    """
    try:
        table = object.__getattribute__(obj, "__dict__")
    except (AttributeError, TypeError):
        return None
    if attr in table:
        return table[attr]
    for registry in torch_compat.MODULE_REGISTRIES:
        entries = table.get(registry)
        if isinstance(entries, dict) and attr in entries:
            return entries[attr]
    return None


_DTYPE_NAMES: dict[Any, str] = {}
_DEVICE_TEXTS: dict[Any, str] = {}
"""Names of the dtypes and devices seen, a handful in a run: ``str()`` of a ``torch.device``
costs more than a dictionary lookup, and every tensor a checked hit sees is named."""
_MAX_NAMED = 256


def _named(table: dict[Any, str], value: Any, name: Callable[[Any], str]) -> str:
    try:
        known = table.get(value)
    except TypeError:  # unhashable: an odd array type's
        return name(value)
    if known is None:
        known = name(value)
        if len(table) < _MAX_NAMED:
            table[value] = known
    return known


def _dtype_text(dtype: Any) -> str:
    text = str(dtype)
    return text[6:] if text.startswith("torch.") else text


def dtype_name(dtype: Any) -> str | None:
    if dtype is None:
        return None
    return _named(_DTYPE_NAMES, dtype, _dtype_text)


DEVICE_ALIASES: dict[str, str] = {}
"""Devices shown under another name: ``meta`` is ``cuda:0`` in a shape-only run that
simulates CUDA (:mod:`shapelens.engine.torch_support.shape_only`)."""


def device_name(device: Any) -> str | None:
    if device is None:
        return None
    name = _named(_DEVICE_TEXTS, device, str)
    return DEVICE_ALIASES.get(name, name) if DEVICE_ALIASES else name
