"""The annotated listing: source lines with their hints, findings and how the run ended.
Printed after ``shapelens run`` (plain or ANSI colours) and shown as a notebook cell's output
by ``%%shapelens`` (HTML)."""

from __future__ import annotations

import html
import linecache
import os
from collections.abc import Iterable, Mapping

from shapelens.present.findings import (
    SEVERITY_MARKS,
    finding_detail,
    related_locations,
    run_ending,
)
from shapelens.present.labels import DEFAULT_STYLE, FileHints, HintStyle, RunUsual, run_usual
from shapelens.present.memory import memory_summary
from shapelens.trace import Finding, Trace, TracedLine

_GAP = 3  # unexecuted runs longer than this are folded into one "⋮" line


class _Style:
    """Plain text, or ANSI colours with ``color``."""

    def __init__(self, color: bool) -> None:
        self.color = color

    def _wrap(self, code: str, text: str) -> str:
        return f"\x1b[{code}m{text}\x1b[0m" if self.color and text else text

    def plain(self, text: str) -> str:
        return text

    def dim(self, text: str) -> str:
        return self._wrap("2", text)

    def hint(self, text: str) -> str:
        return self._wrap("36", text)

    def severity(self, severity: str, text: str) -> str:
        return self._wrap({"error": "31;1", "warning": "33;1"}.get(severity, "34"), text)

    def bold(self, text: str) -> str:
        return self._wrap("1", text)


_HTML_SEVERITY_COLORS = {"error": "#d73a49", "warning": "#b08800"}


class _HtmlStyle(_Style):
    """Escaped text in coloured spans (the same colours as the terminal's)."""

    def __init__(self) -> None:
        super().__init__(color=True)

    def _span(self, css: str, text: str) -> str:
        return f'<span style="{css}">{html.escape(text)}</span>' if text else ""

    def plain(self, text: str) -> str:
        return html.escape(text)

    def dim(self, text: str) -> str:
        return self._span("opacity:0.55", text)

    def hint(self, text: str) -> str:
        return self._span("color:#1f8a9e", text)

    def severity(self, severity: str, text: str) -> str:
        color = _HTML_SEVERITY_COLORS.get(severity, "#0366d6")
        return self._span(f"color:{color};font-weight:bold", text)

    def bold(self, text: str) -> str:
        return self._span("font-weight:bold", text)


def render_listing(
    trace: Trace,
    *,
    color: bool,
    cwd: str | None = None,
    style: HintStyle = DEFAULT_STYLE,
    names: Mapping[str, str] | None = None,
) -> str:
    """The listing as text (ANSI colours with ``color``). ``names``: what to call files that
    are not files (a notebook's cells)."""
    return "\n".join(_listing(trace, _Style(color), cwd, style, names or {})) + "\n"


def render_listing_html(
    trace: Trace,
    *,
    cwd: str | None = None,
    style: HintStyle = DEFAULT_STYLE,
    names: Mapping[str, str] | None = None,
) -> str:
    """The same listing as one HTML ``<pre>`` block."""
    body = "\n".join(_listing(trace, _HtmlStyle(), cwd, style, names or {}))
    return f'<pre class="shapelens-listing" style="line-height:1.3">{body}</pre>'


def _listing(
    trace: Trace, colors: _Style, cwd: str | None, style: HintStyle, names: Mapping[str, str]
) -> list[str]:
    where = _Places(cwd or os.getcwd(), names)
    usual = run_usual(trace.lines, shape_only=trace.shape_only is not None)
    out: list[str] = []
    for file in _ordered_files(trace):
        out.extend(_render_file(trace, file, colors, where, usual, style))
    if trace.memory is not None:
        out.extend(colors.dim(line) for line in memory_summary(trace.memory, where.cwd))
    out.append(_summary(trace, colors))
    if trace.tracing_stopped is not None:
        out.append(
            colors.severity("warning", f"shapelens: {tracing_stopped(trace.tracing_stopped)}")
        )
    return out


def tracing_stopped(why: str) -> str:
    """What to tell when tracing stopped before the program ended (``tracing.stopped``)."""
    return (
        f"tracing stopped early, the program ran on untraced from there: {why}. "
        "This is a ShapeLens bug; please report it."
    )


def _ordered_files(trace: Trace) -> list[str]:
    files = list(dict.fromkeys([*trace.files, *(f.file for f in trace.findings)]))
    script = os.path.realpath(trace.argv[0]) if trace.argv else ""
    return sorted(files, key=lambda f: (f != script, f))


class _Places:
    """How the listing names a file: relative to the cwd, or the name a notebook gave it."""

    def __init__(self, cwd: str, names: Mapping[str, str]) -> None:
        self.cwd = cwd
        self.names = names

    def name(self, path: str) -> str:
        if path in self.names:
            return self.names[path]
        cwd = self.cwd
        return os.path.relpath(path, cwd) if path.startswith(os.path.join(cwd, "")) else path


def _render_file(
    trace: Trace, file: str, style: _Style, where: _Places, usual: RunUsual, hint_style: HintStyle
) -> Iterable[str]:
    source = linecache.getlines(file)
    traced: dict[int, TracedLine] = {line.line: line for line in trace.lines_of(file)}
    simulated = (
        {s.line: s for s in trace.shape_only.simulated if s.file == file}
        if trace.shape_only is not None
        else {}
    )
    hints = FileHints(traced, source, usual, simulated)
    findings: dict[int, list[Finding]] = {}
    for finding in trace.findings_of(file):
        findings.setdefault(finding.line, []).append(finding)
    exc = trace.exception
    exc_line = exc.line if exc is not None and exc.file == file else None
    shown = set(traced) | set(findings) | ({exc_line} if exc_line else set())
    title = where.name(file)
    yield style.bold(f"── {title} " + "─" * max(0, 60 - len(title)))
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
        yield style.plain(gutter + code) + (style.plain(pad) + style.hint(label) if label else "")
        for finding in findings.get(number, []):
            mark = f"{SEVERITY_MARKS.get(finding.severity, '•')} {finding.kind}: "
            detail = style.plain(finding_detail(finding))
            yield style.plain(indent) + style.severity(finding.severity, mark) + detail
            for related in related_locations(finding):
                place = f"{where.name(related.file)}:{related.line}"
                yield style.plain(indent + "    ") + style.dim(f"↳ {place}: {related.message}")
        if exc is not None and number == exc_line:
            severity, _, message = run_ending(trace.status, exc)
            head, _, rest = message.partition(": ")
            mark = (
                f"{SEVERITY_MARKS[severity]} {head}: " if rest else f"{SEVERITY_MARKS[severity]} "
            )
            ending = style.plain((rest or head).splitlines()[0])
            yield style.plain(indent) + style.severity(severity, mark) + ending
    if len(folded) <= _GAP:
        yield from folded


def _unfold(folded: list[str], width: int, style: _Style) -> list[str]:
    if len(folded) <= _GAP:
        return folded
    return [style.dim(" " * width + " ⋮")]


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
        count = trace.shape_only.simulated_values
        values = f", {count} value{'s' if count != 1 else ''} simulated" if count else ""
        status = f"shape-only run (fake tensors{cuda}{values}), {status}"
    return style.dim(
        f"shapelens: {status}, exit {trace.exit_code}, {len(trace.lines)} lines traced, "
        f"{found or 'no findings'}, {compiled + ', ' if compiled else ''}"
        f"{trace.duration_s:.2f}s"
    )
