"""The trace data model, kept apart from its presenters (JSON codec, listing, LSP).

Line numbers are 1-based, file paths absolute. Every field mirrors the JSON format
documented in ``docs/trace-format.md``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

# "running" only marks live snapshots handed to an editor during a run; never written.
RunStatus = Literal["ok", "exception", "exit", "timeout", "crashed", "running"]
Severity = Literal["error", "warning", "info"]


@dataclass(frozen=True, kw_only=True)
class RankValue:
    """One rank's last value of a variable in a distributed run."""

    rank: int
    shape: tuple[int, ...] | None
    dtype: str | None
    device: str | None
    requires_grad: bool | None
    hits: int


@dataclass(frozen=True, kw_only=True)
class TracedVar:
    """One variable (or container entry) bound on one line, aggregated over all hits."""

    name: str
    type: str
    shape: tuple[int, ...] | None
    dtype: str | None
    device: str | None
    requires_grad: bool | None
    hits: int
    shapes: tuple[tuple[int, ...], ...]
    grad_fn: str | None = None
    ranks: tuple[RankValue, ...] = ()
    """Per-rank values of a distributed run (empty for a single process)."""

    @property
    def shape_varies(self) -> bool:
        return len(self.shapes) > 1


@dataclass(frozen=True, kw_only=True)
class TracedLine:
    """One executed line of user code: how often it ran and what it bound."""

    file: str
    line: int
    hits: int
    vars: tuple[TracedVar, ...] = ()
    sampled: bool = False
    """Events were switched off after ``hits`` hits: counts are lower bounds."""


@dataclass(frozen=True, kw_only=True)
class RelatedLocation:
    file: str
    line: int
    message: str


@dataclass(frozen=True, kw_only=True)
class Finding:
    """A likely bug pointed at a line: a broadcast, a device/dtype mismatch, a NaN."""

    kind: str
    severity: Severity
    file: str
    line: int
    message: str
    related: tuple[RelatedLocation, ...] = ()


@dataclass(frozen=True, kw_only=True)
class ExceptionInfo:
    """The exception that ended the run, located at its innermost line of user code."""

    type: str
    message: str
    file: str | None
    line: int | None


@dataclass(frozen=True, kw_only=True)
class Trace:
    argv: tuple[str, ...]
    python: str
    duration_s: float
    status: RunStatus
    exit_code: int
    exception: ExceptionInfo | None = None
    lines: tuple[TracedLine, ...] = ()
    findings: tuple[Finding, ...] = ()
    # Human-readable detail about how the run ended (signal name, timeout), not in the schema core.
    detail: str | None = None

    @property
    def files(self) -> list[str]:
        """Traced files in first-executed order."""
        return list(dict.fromkeys(line.file for line in self.lines))

    def lines_of(self, file: str) -> list[TracedLine]:
        return [line for line in self.lines if line.file == file]

    def findings_of(self, file: str) -> list[Finding]:
        return [f for f in self.findings if f.file == file]
