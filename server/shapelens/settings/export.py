"""The extension manifest's ``contributes.configuration``, from the schema.

``python -m shapelens.settings.export [package.json]`` writes it into the manifest (the
repository's by default); ``tests/test_settings_schema.py`` fails when the two differ.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from shapelens.settings.groups import (
    ExtensionSettings,
    FindingsConfig,
    HintSettings,
    NotebookSettings,
    RunSettings,
)
from shapelens.settings.schema import Kind, Setting, settings_of

MANIFEST_GROUPS = (ExtensionSettings, HintSettings, RunSettings, NotebookSettings, FindingsConfig)
"""The groups the extension's settings come from, in the manifest's order."""

REPOSITORY_MANIFEST = Path(__file__).resolve().parents[3] / "package.json"

_JSON_TYPES: dict[Kind, str] = {
    "bool": "boolean",
    "int": "integer",
    "float": "number",
    "str": "string",
    "list": "array",
    "map": "object",
}


def configuration() -> dict[str, Any]:
    """The ``contributes.configuration`` object."""
    properties = {
        f"shapelens.{item.meta.vscode_key}": _property(item)
        for group in MANIFEST_GROUPS
        for item in settings_of(group)
        if item.meta.vscode_key is not None
    }
    return {"title": "ShapeLens", "properties": properties}


def _property(item: Setting) -> dict[str, Any]:
    kind = _JSON_TYPES[item.kind]
    entry: dict[str, Any] = {"type": [kind, "null"] if item.optional else kind}
    if item.kind == "list":
        entry["items"] = {"type": "string"}
    if item.kind == "map":
        entry["additionalProperties"] = {"type": "string"}
    if item.meta.choices:
        entry["enum"] = list(item.meta.choices)
    if item.meta.choice_help:
        entry["enumDescriptions"] = list(item.meta.choice_help)
    entry["default"] = list(item.default) if isinstance(item.default, tuple) else item.default
    entry.update(item.meta.manifest)
    entry["description"] = item.meta.description or item.meta.help
    return entry


def write(manifest: Path) -> None:
    """Replace the configuration block of ``manifest`` (a package.json), nothing else."""
    data = json.loads(manifest.read_text(encoding="utf-8"))
    data["contributes"]["configuration"] = configuration()
    manifest.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


if __name__ == "__main__":
    write(Path(sys.argv[1]) if len(sys.argv) > 1 else REPOSITORY_MANIFEST)
