"""The corpus's markers and how a program's findings are scored against them.

Two markers, each a comment on the line it is about:

- ``# expect: KIND`` (one or more kinds): a finding of KIND must be reported at that line.
  A crash kind there is a *crash-line* expectation, a silent kind a *silent* one.
- ``# cause: KIND``: the line where the wrong value started, another line than the crash.
  It is met when a finding of KIND names that (file, line) as a ``chain`` step, as an
  operand's birth, as an operand's module declaration, or is itself reported there.

Scoring, per category (crash-line, cause-line, silent):

- a finding of an expected kind at an ``# expect:`` line is a true positive of the
  expectation's category; a ``# cause:`` marker that is met is a true positive of cause-line;
- any other finding of a scored kind is a false positive of its kind's category, except one
  reported at a ``# cause:`` line (it points at the cause: a ``degenerate_op`` warning at
  the ``.squeeze()`` that later makes a shape error; of the cause's kind, it meets it);
- a finding at an ``# expect:`` line that shows a ``chain`` (it claims where the failing
  value came from) in a program with ``# cause:`` markers, but meets none of them, is a
  false positive of cause-line: its chain points somewhere else;
- a marker that is not met is a false negative of its category.
"""

from __future__ import annotations

import io
import re
import tokenize
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CRASH_KINDS = ("shape_mismatch", "dtype_mismatch", "device_mismatch", "op_error")
"""Findings of an exception out of a torch call."""
SILENT_KINDS = ("broadcast", "nonfinite", "library_warning", "degenerate_op", "shape_comment")
"""Findings of a program that runs on, computing something wrong (or documenting it wrong:
a stale shape comment)."""
SCORED_AT_ANY_SEVERITY = frozenset({"shape_comment"})
"""Info findings that are still claims about the code: one on a clean program is a false
alarm, whatever its severity."""
SCORED_KINDS = CRASH_KINDS + SILENT_KINDS
SCORE_CATEGORIES = ("crash-line", "cause-line", "silent")

_MARKER = re.compile(r"#\s*(?P<marker>expect|cause):\s*(?P<kinds>[a-z_]+(?:\s*,\s*[a-z_]+)*)")

Site = tuple[Path, int]


def category_of_kind(kind: str) -> str:
    """``crash-line`` for a crash kind, ``silent`` for any other."""
    return "crash-line" if kind in CRASH_KINDS else "silent"


@dataclass(frozen=True)
class Expectation:
    """One marker: ``# expect: KIND`` (a finding of ``kind`` at (file, line)) or, with
    ``marker="cause"``, ``# cause: KIND`` (a finding of ``kind`` names (file, line))."""

    kind: str
    file: Path
    line: int
    marker: str = "expect"

    @property
    def category(self) -> str:
        return "cause-line" if self.marker == "cause" else category_of_kind(self.kind)

    @property
    def site(self) -> Site:
        return (self.file, self.line)


@dataclass(frozen=True)
class Finding:
    """One finding read back from a trace (only the fields the scoring needs)."""

    kind: str
    file: Path
    line: int
    severity: str
    message: str
    names: frozenset[Site] = frozenset()
    """The (file, line)s it names as where its values came from: chain steps, operands'
    births and operands' module declarations."""
    has_chain: bool = False

    @property
    def key(self) -> tuple[str, Path, int]:
        return (self.kind, self.file, self.line)

    @property
    def category(self) -> str:
        return category_of_kind(self.kind)

    def meets(self, cause: Expectation) -> bool:
        """It is of the cause's kind and is reported at, or names, the cause's line."""
        return self.kind == cause.kind and (
            (self.file, self.line) == cause.site or cause.site in self.names
        )


@dataclass
class Verdict:
    """A program's findings against its markers."""

    true_positives: list[Finding] = field(default_factory=list)
    false_positives: list[Finding] = field(default_factory=list)
    false_negatives: list[Expectation] = field(default_factory=list)
    causes_met: list[Expectation] = field(default_factory=list)
    wrong_causes: list[Finding] = field(default_factory=list)


@dataclass(frozen=True)
class Score:
    true_positives: int
    false_positives: int
    false_negatives: int

    @property
    def precision(self) -> float | None:
        found = self.true_positives + self.false_positives
        return self.true_positives / found if found else None

    @property
    def recall(self) -> float | None:
        wanted = self.true_positives + self.false_negatives
        return self.true_positives / wanted if wanted else None


# -- reading markers and findings -----------------------------------------------------------


def _comments(source: str) -> Iterable[tuple[int, str]]:
    try:
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type == tokenize.COMMENT:
                yield token.start[0], token.string
    except (tokenize.TokenError, SyntaxError):
        # fall back to a plain scan of the lines
        for number, text in enumerate(source.splitlines(), start=1):
            if "#" in text:
                yield number, text[text.index("#") :]


def read_markers(files: Iterable[Path]) -> list[Expectation]:
    """Every ``# expect:`` and ``# cause:`` marker in ``files``, in file and line order."""
    found: list[Expectation] = []
    for path in files:
        source = path.read_text(encoding="utf-8")
        for line, comment in _comments(source):
            for match in _MARKER.finditer(comment):
                for kind in match.group("kinds").split(","):
                    found.append(
                        Expectation(kind.strip(), path.resolve(), line, match.group("marker"))
                    )
    return found


def _site(item: dict[str, Any], default_file: Path) -> Site | None:
    """(file, line) of a trace object with ``line`` and an optional ``file`` (absent or
    null: the finding's own file)."""
    line = item.get("line")
    if not isinstance(line, int):
        return None
    file = item.get("file")
    return (Path(file).resolve() if isinstance(file, str) else default_file, line)


def named_sites(item: dict[str, Any], file: Path) -> frozenset[Site]:
    """The (file, line)s a trace finding names: its chain steps, its operands' births and
    its operands' module declarations."""
    sites: set[Site | None] = set()
    for step in item.get("chain") or ():
        if isinstance(step, dict):
            sites.add(_site(step, file))
    for operand in item.get("operands") or ():
        if not isinstance(operand, dict):
            continue
        sites.add(_site(operand, file))
        module = operand.get("module")
        if isinstance(module, dict):
            sites.add(_site(module, file))
    return frozenset(site for site in sites if site is not None)


# -- scoring ----------------------------------------------------------------------------------


def score_findings(
    expected: Sequence[Expectation], findings: Iterable[Finding], ignore_severities: Iterable[str]
) -> Verdict:
    """Score one program; findings are deduplicated by (kind, file, line), kinds outside
    ``SCORED_KINDS`` and findings of a severity in ``ignore_severities`` are left out."""
    ignored = set(ignore_severities)
    scored = [
        f
        for f in findings
        if f.kind in SCORED_KINDS
        and (f.severity not in ignored or f.kind in SCORED_AT_ANY_SEVERITY)
    ]
    wanted = {(e.kind, e.file, e.line) for e in expected if e.marker == "expect"}
    causes = [e for e in expected if e.marker == "cause"]
    cause_sites = {(e.file, e.line) for e in causes}
    verdict = Verdict()
    unique: dict[tuple[str, Path, int], Finding] = {}
    for finding in scored:
        unique.setdefault(finding.key, finding)
    for key, finding in unique.items():
        if key in wanted:
            verdict.true_positives.append(finding)
        elif (finding.file, finding.line) not in cause_sites:
            verdict.false_positives.append(finding)
    for expectation in expected:
        if (
            expectation.marker == "expect"
            and (
                expectation.kind,
                expectation.file,
                expectation.line,
            )
            not in unique
        ):
            verdict.false_negatives.append(expectation)
    for cause in causes:
        if any(f.meets(cause) for f in scored):
            verdict.causes_met.append(cause)
        else:
            verdict.false_negatives.append(cause)
    if causes:
        verdict.wrong_causes = [
            f for f in verdict.true_positives if f.has_chain and not any(f.meets(c) for c in causes)
        ]
    return verdict
