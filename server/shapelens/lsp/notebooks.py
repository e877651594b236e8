"""Kernel traces placed on notebook cells by content.

A kernel trace (``lsp.kernel_traces``) lists the cells it executed (``Trace.cells``: the
source, the name the kernel compiled it under, when it ran); its lines, findings and
exception are filed under those names. A cell of an open notebook shows the execution whose
source is its current text; failing that, the execution most like it (the share of
non-blank lines that ``line_mapping`` keeps, at least ``MIN_SIMILARITY``). Among equally
good executions the latest (``executed_at``, across every trace file) wins. So results
follow cells through reordering and edits of other cells, a re-execution replaces them, and
a cell that never ran (or whose text no execution resembles) shows nothing.

An execution that another cell of the same notebook shows exactly is not offered to the
others by similarity: a copied and edited cell does not borrow its original's results.

The results themselves live in a :class:`ResultStore` of their own (one owner per trace
file), so a cell's view, hints, hover and diagnostics are built by the same code as a
script's: ``ResultStore.view`` maps the lines that ran onto the cell's current text."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from shapelens.lsp.line_mapping import map_lines
from shapelens.lsp.results import FileView, ResultStore
from shapelens.trace import Trace
from shapelens.trace.model import CellSource

MIN_SIMILARITY = 0.5
"""Share of non-blank lines (of both texts) that must be unchanged for a cell that is not
exactly an executed source to show that execution's results on its unchanged lines."""

NO_RESULTS = Trace(argv=(), python="", duration_s=0.0, status="ok", exit_code=0)
"""A trace with nothing in it: what a forgotten trace file leaves."""


def _key(text: str) -> tuple[str, ...]:
    """The text as compared for an exact match: trailing blanks and blank last lines aside."""
    lines = [line.rstrip() for line in text.splitlines()]
    while lines and not lines[-1]:
        lines.pop()
    return tuple(lines)


@dataclass(frozen=True, kw_only=True)
class Execution:
    """One execution of a cell in one kernel trace file."""

    cell: CellSource
    owner: str
    """The trace file it came from."""
    key: tuple[str, ...] = field(repr=False)
    lines: tuple[str, ...] = field(repr=False)
    counts: Counter[str] = field(repr=False, compare=False)
    """Its non-blank lines, for a cheap upper bound on the similarity."""
    size: int = field(repr=False)
    """How many non-blank lines it has."""


def _execution(cell: CellSource, owner: str) -> Execution:
    lines = tuple(cell.source.splitlines(keepends=True))
    counts = Counter(line.strip() for line in lines if line.strip())
    return Execution(
        cell=cell,
        owner=owner,
        key=_key(cell.source),
        lines=lines,
        counts=counts,
        size=sum(counts.values()),
    )


class NotebookResults:
    """Every kernel trace's executions and results, and their placement on cells."""

    def __init__(self) -> None:
        self.store = ResultStore()
        self._by_owner: dict[str, tuple[Execution, ...]] = {}
        self._exact: dict[tuple[str, ...], Execution] = {}
        self._by_line: dict[str, list[Execution]] = {}
        """Non-blank line (stripped) → the executions that hold it."""
        self.generation = 0
        """Changes whenever a trace file is loaded or dropped."""
        self._placements: dict[str, tuple[object, dict[str, Execution | None]]] = {}
        self._rankings: dict[str, list[Execution]] = {}

    # -- kernel traces ---------------------------------------------------------------------
    def load(self, owner: str, trace: Trace) -> None:
        """Takes what the trace file ``owner`` holds now (replacing what it held before)."""
        latest: dict[str, CellSource] = {}
        for cell in trace.cells:
            known = latest.get(cell.file)
            if known is None or cell.executed_at >= known.executed_at:
                latest[cell.file] = cell
        sources = {
            file: tuple(cell.source.splitlines(keepends=True)) for file, cell in latest.items()
        }
        self.store.update(trace, sources, owner=owner)
        self._by_owner[owner] = tuple(_execution(cell, owner) for cell in latest.values())
        self._reindex()

    def drop(self, owner: str) -> bool:
        """Forgets the trace file ``owner`` (deleted); True when it was known."""
        if owner not in self._by_owner:
            return False
        del self._by_owner[owner]
        self.store.update(NO_RESULTS, {}, owner=owner)
        self._reindex()
        return True

    def _reindex(self) -> None:
        self.generation += 1
        self._placements.clear()
        self._rankings.clear()
        exact: dict[tuple[str, ...], Execution] = {}
        for executions in self._by_owner.values():
            for execution in executions:
                known = exact.get(execution.key)
                if known is None or execution.cell.executed_at > known.cell.executed_at:
                    exact[execution.key] = execution
        self._exact = exact
        # The latest execution of each distinct source, by the lines it holds.
        by_line: dict[str, list[Execution]] = {}
        for execution in exact.values():
            for line in execution.counts:
                by_line.setdefault(line, []).append(execution)
        self._by_line = by_line

    # -- placement ---------------------------------------------------------------------------
    def place(self, notebook: str, cells: Sequence[tuple[str, str]]) -> dict[str, Execution | None]:
        """The execution each cell (``(uri, text)`` in notebook order) shows, or None."""
        signature = (self.generation, tuple((uri, hash(text)) for uri, text in cells))
        cached = self._placements.get(notebook)
        if cached is not None and cached[0] == signature:
            return cached[1]
        keys = {uri: _key(text) for uri, text in cells}
        placed: dict[str, Execution | None] = {
            uri: self._exact.get(key) for uri, key in keys.items()
        }
        claimed = {id(e) for e in placed.values() if e is not None}
        for uri, text in cells:
            if placed[uri] is None and keys[uri]:
                placed[uri] = self._similar(text, claimed)
        if len(self._placements) > 64:
            self._placements.clear()
        self._placements[notebook] = (signature, placed)
        return placed

    def _similar(self, text: str, claimed: set[int]) -> Execution | None:
        for execution in self._ranked(text):
            if id(execution) not in claimed:
                return execution
        return None

    def _ranked(self, text: str) -> list[Execution]:
        """The executions like ``text`` enough, the most alike first (then the newest).
        Kept per text until the traces change: typing in one cell costs that cell only."""
        cached = self._rankings.get(text)
        if cached is not None:
            return cached
        current = tuple(text.splitlines(keepends=True))
        counts = Counter(line.strip() for line in current if line.strip())
        size = sum(counts.values())
        scored: list[tuple[float, float, Execution]] = []
        shared: dict[int, int] = {}  # per execution: the lines both hold (with repeats)
        sharing: dict[int, Execution] = {}
        for line, count in counts.items():
            for execution in self._by_line.get(line, ()):
                key = id(execution)
                sharing[key] = execution
                shared[key] = shared.get(key, 0) + min(count, execution.counts[line])
        for key, execution in sharing.items():
            total = size + execution.size
            # That bound first: most executions share too few lines to be worth a diff.
            if 2 * shared[key] < MIN_SIMILARITY * total:
                continue
            mapping = map_lines(execution.lines, current)
            kept = sum(1 for ran in mapping if execution.lines[ran].strip())
            if kept and 2 * kept >= MIN_SIMILARITY * total:
                scored.append((2 * kept / total, execution.cell.executed_at, execution))
        scored.sort(key=lambda s: (-s[0], -s[1]))
        ranked = [execution for _, _, execution in scored]
        if len(self._rankings) > 1024:
            self._rankings.clear()
        self._rankings[text] = ranked
        return ranked

    def view(self, execution: Execution, current: Sequence[str]) -> FileView | None:
        """``execution``'s results placed on the cell's current lines."""
        results = self.store.get(execution.cell.file)
        if results is None or results.owner != execution.owner:
            return None  # another kernel session compiled a cell under the same name since
        return self.store.view(execution.cell.file, None, current)


def outside_cells(trace: Trace) -> Trace:
    """What a kernel trace holds for files that are not its cells: the user modules the
    cells imported. Shown on those files as a script run's results are (owner: the trace
    file), so a module's hints follow the kernel that last ran it."""
    cells = {cell.file for cell in trace.cells}
    exception = trace.exception
    if exception is not None and (exception.file in cells or exception.file is None):
        exception = None
    return replace(
        trace,
        lines=tuple(line for line in trace.lines if line.file not in cells),
        findings=tuple(f for f in trace.findings if f.file not in cells),
        exception=exception,
        modules=(),
        cells=(),
    )
