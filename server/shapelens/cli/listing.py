"""The annotated listing printed after ``shapelens run``: source lines with their hints."""

from __future__ import annotations

import linecache
import os
from collections.abc import Iterable

from shapelens.present.findings import (
    SEVERITY_MARKS,
    finding_detail,
    related_locations,
    run_ending,
)
from shapelens.present.labels import DEFAULT_STYLE, FileHints, HintStyle, RunUsual, run_usual
from shapelens.trace import Finding, Trace, TracedLine

_GAP = 3  # unexecuted runs longer than this are folded into one "⋮" line


class _Style:
    def __init__(self, color: bool) -> None:
        self.color = color

    def _wrap(self, code: str, text: str) -> str:
        return f"\x1b[{code}m{text}\x1b[0m" if self.color and text else text

    def dim(self, text: str) -> str:
        return self._wrap("2", text)

    def hint(self, text: str) -> str:
        return self._wrap("36", text)

    def severity(self, severity: str, text: str) -> str:
        return self._wrap({"error": "31;1", "warning": "33;1"}.get(severity, "34"), text)

    def bold(self, text: str) -> str:
        return self._wrap("1", text)


def render_listing(
    trace: Trace, *, color: bool, cwd: str | None = None, style: HintStyle = DEFAULT_STYLE
) -> str:
    colors = _Style(color)
    cwd = cwd or os.getcwd()
    usual = run_usual(trace.lines, shape_only=trace.shape_only is not None)
    out: list[str] = []
    files = _ordered_files(trace)
    for file in files:
        out.extend(_render_file(trace, file, colors, cwd, usual, style))
    out.append(_summary(trace, colors))
    return "\n".join(out) + "\n"


def _ordered_files(trace: Trace) -> list[str]:
    files = list(dict.fromkeys([*trace.files, *(f.file for f in trace.findings)]))
    script = os.path.realpath(trace.argv[0]) if trace.argv else ""
    return sorted(files, key=lambda f: (f != script, f))


def _render_file(
    trace: Trace, file: str, style: _Style, cwd: str, usual: RunUsual, hint_style: HintStyle
) -> Iterable[str]:
    source = linecache.getlines(file)
    traced: dict[int, TracedLine] = {line.line: line for line in trace.lines_of(file)}
    hints = FileHints(traced, source, usual)
    findings: dict[int, list[Finding]] = {}
    for finding in trace.findings_of(file):
        findings.setdefault(finding.line, []).append(finding)
    exc = trace.exception
    exc_line = exc.line if exc is not None and exc.file == file else None
    shown = set(traced) | set(findings) | ({exc_line} if exc_line else set())
    yield style.bold(f"── {_display_path(file, cwd)} " + "─" * max(0, 60 - len(file)))
    width = max(len(str(len(source))), 3)
    code_width = min(
        max((len(source[n - 1].rstrip()) for n in shown if 0 < n <= len(source)), default=0), 60
    )
    indent = " " * width + " │   "
    folded: list[str] = []
    for number, text in enumerate(source, start=1):
        code = text.rstrip("\n").expandtabs(4)
        gutter = f"{number:>{width}} │ "
        if number not in shown:
            folded.append(style.dim(gutter + code))
            continue
        yield from _unfold(folded, width, style)
        folded = []
        line = traced.get(number)
        label = hints.label(line, hint_style) if line is not None else ""
        pad = " " * max(1, code_width - len(code) + 2)
        yield gutter + code + (pad + style.hint(label) if label else "")
        for finding in findings.get(number, []):
            mark = f"{SEVERITY_MARKS.get(finding.severity, '•')} {finding.kind}: "
            yield indent + style.severity(finding.severity, mark) + finding_detail(finding)
            for related in related_locations(finding):
                where = f"{_display_path(related.file, cwd)}:{related.line}"
                yield indent + "    " + style.dim(f"↳ {where}: {related.message}")
        if exc is not None and number == exc_line:
            severity, _, message = run_ending(trace.status, exc)
            head, _, rest = message.partition(": ")
            mark = (
                f"{SEVERITY_MARKS[severity]} {head}: " if rest else f"{SEVERITY_MARKS[severity]} "
            )
            yield indent + style.severity(severity, mark) + (rest or head).splitlines()[0]
    if len(folded) <= _GAP:
        yield from folded


def _unfold(folded: list[str], width: int, style: _Style) -> list[str]:
    if len(folded) <= _GAP:
        return folded
    return [style.dim(" " * width + " ⋮")]


def _display_path(path: str, cwd: str) -> str:
    return os.path.relpath(path, cwd) if path.startswith(os.path.join(cwd, "")) else path


def _summary(trace: Trace, style: _Style) -> str:
    counts: dict[str, int] = {}
    for finding in trace.findings:
        counts[finding.severity] = counts.get(finding.severity, 0) + 1
    found = ", ".join(f"{n} {s}{'s' if n > 1 else ''}" for s, n in sorted(counts.items()))
    status = trace.status + (f" ({trace.detail})" if trace.detail else "")
    compiled = {
        "eager": "torch.compile ran eagerly (--compile keeps it)",
        "compiled": "torch.compile kept (no hints inside compiled code)",
    }.get(trace.compile_mode or "")
    if trace.shape_only is not None:
        cuda = ", CUDA simulated" if trace.shape_only.simulated_cuda else ""
        status = f"shape-only run (fake tensors{cuda}), {status}"
    return style.dim(
        f"shapelens: {status}, exit {trace.exit_code}, {len(trace.lines)} lines traced, "
        f"{found or 'no findings'}, {compiled + ', ' if compiled else ''}"
        f"{trace.duration_s:.2f}s"
    )
