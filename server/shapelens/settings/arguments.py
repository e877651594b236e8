"""A language-server command's arguments, read against the settings schema.

Each argument is a setting of some group, named by its ``argument`` (``fake``,
``nprocPerNode``): the command takes exactly those, of the kinds the schema declares. The
first one that does not fit is an :class:`ArgumentError`, in words, for the client.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from shapelens.settings.schema import accepts, converted, expected, settings_of


class ArgumentError(ValueError):
    """Arguments a command cannot take; the message says which and what it expected."""


def read_arguments(command: str, raw: Any, groups: Sequence[Any]) -> tuple[Any, ...]:
    """``groups`` (instances: what holds when an argument is absent) with the values the
    command's one argument object ``raw`` sets."""
    by_name = {
        item.meta.argument: (index, item)
        for index, group in enumerate(groups)
        for item in settings_of(type(group))
        if item.meta.argument is not None
    }
    if not isinstance(raw, Mapping):
        raise ArgumentError(f"{command} takes one argument: an object such as {_example(by_name)}")
    unknown = sorted(str(key) for key in raw if key not in by_name)
    if unknown:
        known = ", ".join(sorted(by_name))
        raise ArgumentError(f"{command}: unknown argument {', '.join(unknown)} (known: {known})")
    changes: list[dict[str, Any]] = [{} for _ in groups]
    for name, (index, item) in by_name.items():
        if name not in raw:
            if item.meta.required:
                raise ArgumentError(f"{command}: {name} is missing: {item.meta.help}")
            continue
        value = raw[name]
        if not accepts(item, value) or (item.meta.required and value is None):
            raise ArgumentError(f"{command}: {name} must be {expected(item)}, not {value!r:.60}")
        changes[index][item.name] = converted(item, value)
    return tuple(dataclasses.replace(g, **c) for g, c in zip(groups, changes, strict=True))


def _example(by_name: Mapping[str, Any]) -> str:
    required = [name for name, (_, item) in by_name.items() if item.meta.required]
    return "{" + ", ".join(f'"{name}": ...' for name in required) + "}"
