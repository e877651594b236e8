"""A run's options as one record, and its JSON.

:class:`RunOptions` holds the schema's groups that shape a run (what is traced and how, how
the program runs, which findings are looked for) whole. The command line reads it from its
flags, the language server from the editor's settings and the ``shapelens.run`` arguments;
the runner hands it to the traced child as it is (``runner/contract.py``). A new option is
a field of one group: no other code copies it on its way to the child.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from shapelens.settings.groups import FindingsConfig, RunSettings, TracingOptions
from shapelens.settings.schema import accepts, converted, expected, settings_of

Group = TypeVar("Group")


class OptionsError(ValueError):
    """Options the child cannot read: another version of ShapeLens wrote them."""


@dataclass(frozen=True, kw_only=True)
class RunOptions:
    """Every option of one run: the settings schema's groups, each whole."""

    tracing: TracingOptions = field(default_factory=TracingOptions)
    run: RunSettings = field(default_factory=RunSettings)
    findings: FindingsConfig = field(default_factory=FindingsConfig)

    def to_json(self) -> dict[str, Any]:
        return {f.name: group_to_json(getattr(self, f.name)) for f in dataclasses.fields(self)}

    @classmethod
    def from_json(cls, data: Any) -> RunOptions:
        """The inverse of :meth:`to_json`; an :class:`OptionsError` names what does not fit."""
        if not isinstance(data, Mapping):
            raise OptionsError(f"run options are not an object: {data!r:.80}")
        groups = {f.name: f for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - set(groups))
        if unknown:
            raise OptionsError(f"unknown run option groups: {', '.join(unknown)}")
        values: dict[str, Any] = {
            name: group_from_json(_group_type(cls, name), data[name], name)
            for name in groups
            if name in data
        }
        return cls(**values)


def _group_type(cls: type, name: str) -> type:
    kind: type = typing.get_type_hints(cls)[name]
    return kind


def group_to_json(group: Any) -> dict[str, Any]:
    """One group's values as JSON values (tuples as lists)."""
    out: dict[str, Any] = {}
    for item in settings_of(type(group)):
        value = getattr(group, item.name)
        out[item.name] = list(value) if isinstance(value, tuple) else value
    return out


def group_from_json(kind: type[Group], data: Any, where: str) -> Group:
    """A group from :func:`group_to_json`'s JSON, checked against the schema: an unknown
    field, or a value of the wrong kind, is an :class:`OptionsError`."""
    if not isinstance(data, Mapping):
        raise OptionsError(f"run options {where}: not an object: {data!r:.80}")
    items = {item.name: item for item in settings_of(kind)}
    unknown = sorted(set(data) - set(items))
    if unknown:
        raise OptionsError(f"run options {where}: unknown {', '.join(unknown)}")
    values: dict[str, Any] = {}
    for name, value in data.items():
        item = items[name]
        if not (accepts(item, value) or (item.kind == "str" and value == "")):
            raise OptionsError(f"run options {where}.{name}: expected {expected(item)}")
        values[name] = converted(item, value)
    return kind(**values)
