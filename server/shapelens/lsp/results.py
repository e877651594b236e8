"""The last run's results per file, and their view on a document as it is now."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from shapelens.lsp.line_mapping import map_lines
from shapelens.present.labels import FileHints, run_usual
from shapelens.trace import ExceptionInfo, Finding, Trace, TracedLine
from shapelens.trace.model import LineCost, ModuleCall, ShapeOnlyRun, SimulatedLine


@dataclass(frozen=True, kw_only=True)
class FileResults:
    """What one run left for one file, with the text that ran (to follow later edits)."""

    path: str
    owner: str
    """The script whose run produced these results."""
    run: int
    """The store's update that stored these: each update gets a new, larger number, so caches
    key by it (never by ``id()``: a freed object's id may be given to the next one)."""
    source: tuple[str, ...]
    lines: dict[int, TracedLine]  # 1-based line that ran
    findings: tuple[Finding, ...]
    exception: ExceptionInfo | None
    hints: FileHints = field(repr=False)
    """The labels of ``lines`` (they leave out what the run's usual dtype/device says)."""
    shape_only: ShapeOnlyRun | None = None
    """The run was on fake tensors (``--fake``)."""
    status: str = "ok"
    """How the run ended (``exception`` is where, for this file)."""
    costs: dict[int, LineCost] = field(default_factory=dict)
    """A shape-only run's memory and FLOPs of each 1-based line that ran ops."""
    simulated: dict[int, SimulatedLine] = field(default_factory=dict)
    """A shape-only run's stand-in values on each 1-based line that read some."""


@dataclass(frozen=True, kw_only=True)
class FileView:
    """Results placed on the current document: 0-based current line → results."""

    results: FileResults
    lines: dict[int, TracedLine]
    findings: tuple[tuple[int, Finding], ...]
    exception_line: int | None
    to_current: dict[int, int] = field(repr=False)
    """1-based line that ran → 0-based current line."""

    def current_line(self, ran_line: int) -> int | None:
        return self.to_current.get(ran_line)


class ResultStore:
    def __init__(self) -> None:
        self._files: dict[str, FileResults] = {}
        self._views: dict[tuple[str, int | None, int], FileView] = {}
        self._updates = 0
        self.last_trace: Trace | None = None
        self._modules: dict[str, tuple[ModuleCall, ...]] = {}
        """Per owner (the script that ran): its run's module tree."""

    def update(self, trace: Trace, sources: dict[str, tuple[str, ...]], owner: str) -> list[str]:
        """Replace what ``owner``'s previous run left with this run's results; returns the
        paths whose results changed (so stale hints of files the new run no longer reaches
        are removed, not kept)."""
        self.last_trace = trace
        self._modules[owner] = trace.modules
        self._updates += 1
        files = set(trace.files) | {f.file for f in trace.findings} | set(sources)
        if trace.exception is not None and trace.exception.file:
            files.add(trace.exception.file)
        usual = run_usual(trace.lines, shape_only=trace.shape_only is not None)
        dropped = [p for p, r in self._files.items() if r.owner == owner and p not in files]
        for path in dropped:
            del self._files[path]
        by_file: dict[str, dict[int, TracedLine]] = {}
        for line in trace.lines:  # one pass: a notebook's trace holds hundreds of files
            by_file.setdefault(line.file, {})[line.line] = line
        findings_of: dict[str, list[Finding]] = {}
        for finding in trace.findings:
            findings_of.setdefault(finding.file, []).append(finding)
        simulated_of: dict[str, dict[int, SimulatedLine]] = {}
        for read in trace.shape_only.simulated if trace.shape_only is not None else ():
            simulated_of.setdefault(read.file, {})[read.line] = read
        costs_of: dict[str, dict[int, LineCost]] = {}
        for cost in trace.memory.lines if trace.memory is not None else ():
            costs_of.setdefault(cost.file, {})[cost.line] = cost
        for path in files:
            lines = by_file.get(path, {})
            simulated = simulated_of.get(path, {})
            self._files[path] = FileResults(
                path=path,
                owner=owner,
                run=self._updates,
                source=sources.get(path, ()),
                lines=lines,
                hints=FileHints(lines, sources.get(path, ()), usual, simulated),
                shape_only=trace.shape_only,
                status=trace.status,
                costs=costs_of.get(path, {}),
                simulated=simulated,
                findings=tuple(findings_of.get(path, ())),
                exception=trace.exception
                if trace.exception is not None and trace.exception.file == path
                else None,
            )
        self._views.clear()
        return sorted(files | set(dropped))

    def clear(self, path: str | None = None) -> list[str]:
        cleared = list(self._files) if path is None else [path] if path in self._files else []
        for name in cleared:
            del self._files[name]
        self._views.clear()
        return cleared

    def modules_of(self, path: str) -> tuple[ModuleCall, ...]:
        """The module tree of the last run of ``path``, or of the run that reached it."""
        if path in self._modules:
            return self._modules[path]
        results = self._files.get(path)
        return self._modules.get(results.owner, ()) if results is not None else ()

    def paths(self) -> list[str]:
        return list(self._files)

    def get(self, path: str) -> FileResults | None:
        return self._files.get(path)

    def view(self, path: str, version: int | None, current: Sequence[str]) -> FileView | None:
        results = self._files.get(path)
        if results is None:
            return None
        key = (path, version, hash(tuple(current)) if version is None else 0)
        cached = self._views.get(key)
        if cached is not None:
            return cached
        mapping = map_lines(results.source, current) if results.source else {}
        to_current = {ran + 1: now for ran, now in mapping.items()}
        lines = {
            to_current[number]: line
            for number, line in results.lines.items()
            if number in to_current
        }
        findings = tuple((to_current[f.line], f) for f in results.findings if f.line in to_current)
        exc = results.exception
        exception_line = to_current.get(exc.line) if exc is not None and exc.line else None
        view = FileView(
            results=results,
            lines=lines,
            findings=findings,
            exception_line=exception_line,
            to_current=to_current,
        )
        if len(self._views) > 256:
            self._views.clear()
        self._views[key] = view
        return view
