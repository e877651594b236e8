"""How a setting is described: a dataclass field with a :class:`Meta` in its metadata.

Only what differs between the surfaces is written down (the CLI flag, the client's
camelCase key, the manifest's own default); types and defaults come from the field.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

Kind = Literal["bool", "int", "float", "str", "list", "map"]
"""The JSON kind of a value: ``list`` is a tuple of strings, ``map`` a str → str dict."""

_KINDS: dict[object, Kind] = {
    bool: "bool",
    int: "int",
    float: "float",
    str: "str",
    tuple: "list",
    dict: "map",
}


@dataclass(frozen=True, kw_only=True)
class Meta:
    help: str
    """The command line's help; the manifest's description unless ``description`` is set."""
    flag: str | None = None
    """The long CLI flag (``--timeout``); ``None``: not on the command line. Booleans that
    share one flag (``--no-findings KIND``) are switched off by naming them."""
    short: str | None = None
    metavar: str | None = None
    const: str | None = None
    """The flag's value may be left out (``--log`` alone means ``--log -``)."""
    key: str | None = None
    """The client's name under ``shapelens.`` (dotted for a nested object:
    ``findings.broadcast``); ``None``: not a client setting."""
    vscode: str | bool = True
    """The extension manifest shows it: ``True`` under ``key``, a name under that one."""
    description: str | None = None
    choices: tuple[str, ...] = ()
    choice_help: tuple[str, ...] = ()
    """The manifest's ``enumDescriptions``, one per choice."""
    positive: bool = False
    """Numbers must be above zero (the client's values; a CLI float too)."""
    manifest: Mapping[str, Any] = field(default_factory=dict)
    """Manifest properties that differ from the ones the field implies (the extension's own
    default, a minimum it enforces)."""
    argument: str | None = None
    """Its name in the language server's ``shapelens.run`` arguments; ``None``: not one."""
    required: bool = False
    """An argument the command cannot do without (its ``None`` default means: missing)."""

    @property
    def vscode_key(self) -> str | None:
        if self.key is None or self.vscode is False:
            return None
        return self.key if self.vscode is True else str(self.vscode)


def setting(default: Any, **meta: Any) -> Any:
    """A dataclass field with an immutable ``default``, described by ``Meta(**meta)``."""
    return field(default=default, metadata=described(**meta))


def described(**meta: Any) -> dict[str, Meta]:
    """The metadata of a field described by ``Meta(**meta)``; for a mutable default:
    ``field(default_factory=dict, metadata=described(...))``."""
    return {"shapelens": Meta(**meta)}


@dataclass(frozen=True)
class Setting:
    """One field of a group, with its kind and metadata resolved."""

    name: str
    kind: Kind
    optional: bool
    default: Any
    meta: Meta


def settings_of(group: type) -> Iterator[Setting]:
    hints = typing.get_type_hints(group)
    for f in dataclasses.fields(group):
        kind, optional = _kind(hints[f.name])
        factory = f.default_factory
        default = f.default if factory is dataclasses.MISSING else factory()
        yield Setting(f.name, kind, optional, default, f.metadata["shapelens"])


def _kind(annotation: Any) -> tuple[Kind, bool]:
    """``float | None`` → ``("float", True)``."""
    args = typing.get_args(annotation)
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        (inner,) = (a for a in args if a is not type(None))
        return _kind(inner)[0], True
    return _KINDS[typing.get_origin(annotation) or annotation], False


def accepts(item: Setting, value: Any) -> bool:
    """Whether ``value`` (as JSON brings it) fits ``item``: its kind, choices, positivity."""
    if value is None:
        return item.optional
    if item.kind == "bool":
        return isinstance(value, bool)
    if item.kind in ("int", "float"):
        kinds = (int,) if item.kind == "int" else (int, float)
        number = isinstance(value, kinds) and not isinstance(value, bool)
        return number and (value > 0 or not item.meta.positive)
    if item.kind == "str":
        if item.meta.choices:
            return value in item.meta.choices
        return isinstance(value, str) and bool(value.strip())
    if item.kind == "list":
        return isinstance(value, list | tuple) and all(isinstance(v, str) for v in value)
    return isinstance(value, Mapping) and all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    )


def converted(item: Setting, value: Any) -> Any:
    """An accepted JSON ``value`` as the field holds it (lists as tuples)."""
    if value is None:
        return None
    if item.kind == "float":
        return float(value)
    if item.kind == "list":
        return tuple(value)
    return dict(value) if item.kind == "map" else value


def expected(item: Setting) -> str:
    """What ``item`` takes, in words, for a message about a value it does not accept."""
    if item.meta.choices:
        return "one of " + ", ".join(item.meta.choices)
    words = {
        "bool": "true or false",
        "int": "a positive integer" if item.meta.positive else "an integer",
        "float": "a positive number" if item.meta.positive else "a number",
        "str": "a non-empty string",
        "list": "a list of strings",
        "map": "an object mapping names to strings",
    }[item.kind]
    return f"{words} or null" if item.optional else words
