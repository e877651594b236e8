"""Typed server settings (``shapelens.*``), read from ``initializationOptions`` and
``workspace/didChangeConfiguration``. Invalid values become defaults plus a message."""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Any

from shapelens.present.labels import HINT_FORMATS, HintStyle

FINDING_GROUPS = ("broadcast", "mismatch", "nonfinite", "warnings")
"""The kinds of finding a setting turns on and off (``shapelens.findings.<kind>``)."""


@dataclass(frozen=True, kw_only=True)
class Settings:
    interpreter: str | None = None
    """Python that runs the user's code; ``None``: the server's own interpreter."""
    extra_env: dict[str, str] = field(default_factory=dict)
    timeout_s: float | None = None
    broadcast: bool = True
    mismatch: bool = True
    nonfinite: bool = True
    warnings: bool = True
    nonfinite_max_elements: int = 1_000_000
    nonfinite_on_gpu: bool = False
    scalars_on_gpu: bool = False
    """Read 0-dim GPU tensors (a loss) for their course: synchronises the device."""
    hint_format: str = "compact"
    """``compact``: dtype, device, grad and counts only where they are news; ``full``."""
    coverage: bool = False
    """Lines that bound no value show how often they ran."""
    max_hint_length: int = 43
    """VS Code truncates inlay hints at 43 characters by default."""
    keep_compile: bool = False
    """``shapelens.compile``: keep torch.compile (no hints inside compiled functions)."""
    trace_dir: str | None = None
    """``shapelens.traceDir``: one more folder where Jupyter kernels write their traces
    (``kernel-*.json``); relative to each workspace folder unless absolute."""

    @property
    def hint_style(self) -> HintStyle:
        return HintStyle(format=self.hint_format, coverage=self.coverage)


_CAMEL = {
    "interpreter": "interpreter",
    "extraEnv": "extra_env",
    "timeout": "timeout_s",
    "nonfiniteMaxElements": "nonfinite_max_elements",
    "nonfiniteOnGpu": "nonfinite_on_gpu",
    "scalarsOnGpu": "scalars_on_gpu",
    "hintFormat": "hint_format",
    "maxHintLength": "max_hint_length",
    "compile": "keep_compile",
    "traceDir": "trace_dir",
}


def _valid(name: str, value: Any) -> bool:
    if name in ("interpreter", "trace_dir"):
        return value is None or (isinstance(value, str) and bool(value.strip()))
    if name == "extra_env":
        return isinstance(value, dict) and all(
            isinstance(k, str) and isinstance(v, str) for k, v in value.items()
        )
    if name == "timeout_s":
        return value is None or (
            isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0
        )
    if name in (*FINDING_GROUPS, "nonfinite_on_gpu", "scalars_on_gpu", "keep_compile", "coverage"):
        return isinstance(value, bool)
    if name in ("nonfinite_max_elements", "max_hint_length"):
        return isinstance(value, int) and not isinstance(value, bool) and value > 0
    if name == "hint_format":
        return value in HINT_FORMATS
    return False


def parse_settings(raw: Any, base: Settings | None = None) -> tuple[Settings, list[str]]:
    """Settings from ``{"shapelens": {...}}`` or the inner object; problems in words."""
    base = base or Settings()
    if raw is None:
        return base, []
    if isinstance(raw, dict) and isinstance(raw.get("shapelens"), dict):
        raw = raw["shapelens"]
    if not isinstance(raw, dict):
        return base, [f"shapelens settings must be an object, got {type(raw).__name__}"]
    changes: dict[str, Any] = {}
    problems: list[str] = []
    known = {f.name for f in fields(Settings)}
    for key, value in raw.items():
        if key == "findings" and isinstance(value, dict):
            for kind, enabled in value.items():
                if kind in FINDING_GROUPS and isinstance(enabled, bool):
                    changes[kind] = enabled
                else:
                    problems.append(f"shapelens.findings.{kind}: expected true/false")
            continue
        name = _CAMEL.get(key, key)
        if name not in known:
            problems.append(f"shapelens.{key}: unknown setting")
            continue
        if not _valid(name, value):
            problems.append(f"shapelens.{key}: invalid value {value!r}, using the default")
            continue
        changes[name] = float(value) if name == "timeout_s" and value is not None else value
    return replace(base, **changes), problems
