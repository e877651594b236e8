"""Command-line flags derived from the schema, and a group read back from parsed flags.

A setting's flag follows from its kind: a boolean is a switch (an optional one gets a
``--no-`` twin), a tuple is repeatable, a number or a string takes a value. Booleans that
share one flag are switched off by naming them (``--no-findings broadcast``).
"""

from __future__ import annotations

import argparse
from typing import Any, TypeVar

from shapelens.settings.schema import Setting, settings_of

Group = TypeVar("Group")


def add_flags(parser: argparse.ArgumentParser, group: type, title: str) -> None:
    """An argument for every setting of ``group`` that has a flag, under ``title``."""
    section = parser.add_argument_group(title)
    shared = _shared_flags(group)
    for flag, members in shared.items():
        names = [s.name for s in members]
        section.add_argument(
            flag,
            dest=_dest(flag),
            action="append",
            default=[],
            choices=names,
            metavar="KIND",
            help=f"turn a finding off ({', '.join(names)})",
        )
    for item in settings_of(group):
        if item.meta.flag is not None and item.meta.flag not in shared:
            _add_one(section, item)


def read_flags(group: type[Group], options: argparse.Namespace) -> Group:
    """The ``group`` the parsed ``options`` describe; settings without a flag keep their
    defaults."""
    shared = _shared_flags(group)
    values: dict[str, Any] = {}
    for item in settings_of(group):
        flag = item.meta.flag
        if flag is None:
            continue
        if flag in shared:
            values[item.name] = item.name not in getattr(options, _dest(flag))
        elif item.kind == "list":
            values[item.name] = tuple(getattr(options, item.name) or ())
        else:
            values[item.name] = getattr(options, item.name)
    return group(**values)


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError("must be positive")
    return value


def _add_one(section: argparse._ArgumentGroup, item: Setting) -> None:
    meta = item.meta
    assert meta.flag is not None
    names = [meta.flag, *([meta.short] if meta.short else [])]
    common: dict[str, Any] = {"dest": item.name, "help": meta.help}
    if item.kind == "bool" and item.optional:  # --color / --no-color, unset: None
        pair = section.add_mutually_exclusive_group()
        pair.add_argument(*names, action="store_true", default=None, **common)
        pair.add_argument(f"--no-{meta.flag[2:]}", dest=item.name, action="store_false")
        return
    if item.kind == "bool":
        section.add_argument(
            *names, action="store_false" if item.default else "store_true", **common
        )
        return
    common["metavar"] = meta.metavar
    if item.kind == "list":
        section.add_argument(*names, action="append", **common)
        return
    if meta.const is not None:
        common.update(nargs="?", const=meta.const)
    if meta.choices:
        common["choices"] = meta.choices
        del common["metavar"]
    parse = {"int": int, "float": positive_float if meta.positive else float, "str": str}
    section.add_argument(*names, type=parse[item.kind], default=item.default, **common)


def _shared_flags(group: type) -> dict[str, list[Setting]]:
    """Flags that several booleans of ``group`` share, with those booleans."""
    by_flag: dict[str, list[Setting]] = {}
    for item in settings_of(group):
        if item.meta.flag is not None:
            by_flag.setdefault(item.meta.flag, []).append(item)
    return {flag: items for flag, items in by_flag.items() if len(items) > 1}


def _dest(flag: str) -> str:
    return flag.lstrip("-").replace("-", "_")
