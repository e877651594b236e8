"""The server's settings (``shapelens.*``), read from ``initializationOptions`` and
``workspace/didChangeConfiguration`` into the schema's groups (:mod:`shapelens.settings`).
Invalid values keep what was there, plus a message."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from shapelens.present.labels import HintStyle
from shapelens.settings.client import read_client
from shapelens.settings.groups import FindingsConfig, HintSettings, NotebookSettings, RunSettings


@dataclass(frozen=True, kw_only=True)
class Settings:
    run: RunSettings = field(default_factory=RunSettings)
    findings: FindingsConfig = field(default_factory=FindingsConfig)
    hints: HintSettings = field(default_factory=HintSettings)
    notebooks: NotebookSettings = field(default_factory=NotebookSettings)

    @property
    def hint_style(self) -> HintStyle:
        hints = self.hints
        return HintStyle(
            format=hints.hint_format, coverage=hints.coverage, dim_names=hints.dim_names
        )


def parse_settings(raw: Any, base: Settings | None = None) -> tuple[Settings, list[str]]:
    """Settings from ``{"shapelens": {...}}`` or the inner object; problems in words."""
    base = base or Settings()
    if raw is None:
        return base, []
    if isinstance(raw, dict) and isinstance(raw.get("shapelens"), dict):
        raw = raw["shapelens"]
    if not isinstance(raw, dict):
        return base, [f"shapelens settings must be an object, got {type(raw).__name__}"]
    groups, problems = read_client(raw, (base.run, base.findings, base.hints, base.notebooks))
    run, findings, hints, notebooks = groups
    return Settings(run=run, findings=findings, hints=hints, notebooks=notebooks), problems
