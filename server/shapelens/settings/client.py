"""An editor's ``shapelens.*`` settings read into the schema's groups.

The client sends camelCase keys, nested objects for dotted ones (``findings.broadcast``).
A value of the wrong kind, or an unknown key, is reported in words and changes nothing:
a bad setting never stops the server.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from shapelens.settings.schema import accepts, converted, settings_of


def read_client(
    raw: Mapping[str, Any], groups: tuple[Any, ...]
) -> tuple[tuple[Any, ...], list[str]]:
    """``groups`` (instances) with the values ``raw`` sets; the problems found, in words."""
    by_key = {
        item.meta.key: (index, item)
        for index, group in enumerate(groups)
        for item in settings_of(type(group))
        if item.meta.key is not None
    }
    nests = {key.partition(".")[0] for key in by_key if "." in key}
    changes: list[dict[str, Any]] = [{} for _ in groups]
    problems: list[str] = []
    for key, value in _flattened(raw, nests):
        found = by_key.get(key)
        if found is None:
            problems.append(f"shapelens.{key}: unknown setting")
            continue
        index, item = found
        if not accepts(item, value):
            problems.append(f"shapelens.{key}: invalid value {value!r}, using the default")
            continue
        changes[index][item.name] = converted(item, value)
    updated = tuple(dataclasses.replace(g, **c) for g, c in zip(groups, changes, strict=True))
    return updated, problems


def _flattened(raw: Mapping[str, Any], nests: set[str]) -> list[tuple[str, Any]]:
    """``{"findings": {"broadcast": false}}`` → ``[("findings.broadcast", False)]``."""
    pairs: list[tuple[str, Any]] = []
    for key, value in raw.items():
        if key in nests and isinstance(value, Mapping):
            pairs.extend((f"{key}.{inner}", item) for inner, item in value.items())
        else:
            pairs.append((key, value))
    return pairs
