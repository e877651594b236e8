"""Findings: likely bugs pointed at a line (broadcast, device/dtype mismatch, non-finite).

Which ones to look for is a group of the settings schema, :class:`FindingsConfig`; the
engine's side imports it from here."""

from shapelens.settings.groups import FindingsConfig

__all__ = ["FindingsConfig"]
