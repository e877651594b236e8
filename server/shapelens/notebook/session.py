"""A kernel session's tracing: each cell runs under the engine, in the kernel's own process,
and the session's trace file is rewritten after every cell.

No IPython here (:mod:`shapelens.notebook.ipython` is the glue): a cell is a name, its text
and something to run, so this part is tested without a kernel too.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from shapelens.engine.backends.choice import choose_backend
from shapelens.engine.recording.run_records import VarStats
from shapelens.engine.recording.scope import ScopeConfig, UserCodeScope
from shapelens.engine.session import Engine, EngineConfig
from shapelens.settings.groups import FindingsConfig
from shapelens.settings.options import RunOptions
from shapelens.trace.builder import TraceBuilder
from shapelens.trace.codec import write_trace
from shapelens.trace.model import (
    CellSource,
    CompileMode,
    ExceptionInfo,
    Finding,
    Trace,
    TracedLine,
)

TRACE_DIR_VARIABLE = "SHAPELENS_TRACE_DIR"
TRACE_FILE_PREFIX = "kernel-"
"""Trace files are ``kernel-<pid>-<start>.json``: editors watch for this name."""


def trace_directory(cwd: str) -> str:
    """``$SHAPELENS_TRACE_DIR``, else ``.shapelens/`` in the kernel's working directory."""
    return os.environ.get(TRACE_DIR_VARIABLE) or os.path.join(cwd, ".shapelens")


@dataclass(frozen=True, kw_only=True)
class CellRun:
    """What one execution of a cell gave: its own trace, and the cell's identity."""

    cell: CellSource
    trace: Trace


class ActiveCell:
    """The engine running for one cell: started before the cell's code, stopped after. The
    same engine as a script's run (:mod:`shapelens.engine.session`), so a cell follows the
    same rules: ``torch.compile`` regions run eagerly, with hints, unless kept."""

    def __init__(
        self,
        scope: ScopeConfig,
        options: RunOptions,
        sources: Mapping[str, str],
        born: Sequence[VarStats],
    ) -> None:
        self.engine = Engine(
            EngineConfig(
                scope=scope,
                options=options,
                backend=choose_backend(),
                sources=sources,
                earlier=born,
                module_tree=False,  # a kernel's trace has no module tree (yet)
            )
        )
        self.records = self.engine.records
        self.started = time.perf_counter()
        self.engine.start()

    def finish(self, error: BaseException | None, scope: UserCodeScope) -> Trace:
        """Stop the engine (always) and assemble this cell's trace."""
        self.engine.stop()
        duration = time.perf_counter() - self.started
        self.engine.conclude(error)
        builder = TraceBuilder(argv=[])
        builder.python = ".".join(map(str, sys.version_info[:3]))
        for message in self.engine.drain(last=True):
            builder.accept(message)
        self.engine.close()
        trace = builder.build(duration_s=duration, returncode=0, outcome=None)
        if error is None:
            return replace(trace, status="ok", exit_code=0, detail=None)
        failed = _describe(error, scope)
        return replace(trace, status="exception", exit_code=1, detail=None, exception=failed)


class KernelSession:
    """Every traced cell of one kernel, and the trace file that says what they gave.

    The file holds, for every file a cell's code ran in (the cell itself, cells whose
    functions it called, user modules), what the latest execution that ran there recorded,
    and each cell's text as it was executed: an editor places results by that text."""

    def __init__(
        self,
        *,
        cwd: str,
        cell_files: Sequence[str],
        trace_dir: str | None = None,
        findings: FindingsConfig | None = None,
    ) -> None:
        self._scope_config = ScopeConfig(root=cwd, cell_files=tuple(cell_files))
        self.scope = UserCodeScope(self._scope_config)
        self.options = RunOptions(findings=findings or FindingsConfig())
        started = time.strftime("%Y%m%dT%H%M%S")
        self.trace_path = os.path.join(
            trace_dir or trace_directory(cwd), f"{TRACE_FILE_PREFIX}{os.getpid()}-{started}.json"
        )
        self.enabled = True
        self._active: ActiveCell | None = None
        self._cells: dict[str, CellSource] = {}
        self._lines: dict[str, dict[int, TracedLine]] = {}
        self._findings: dict[str, tuple[Finding, ...]] = {}
        self._exception: ExceptionInfo | None = None
        self._compile_mode: CompileMode | None = None
        """How the latest cell that called ``torch.compile`` ran it."""
        self._duration = 0.0
        self._born: list[VarStats] = []
        """Values earlier cells bound that are still alive: their birth lines, for findings."""
        self.cells_traced = 0
        self._write_failed = False

    @property
    def tracing(self) -> bool:
        return self._active is not None

    def begin(self, sources: Mapping[str, str] | None = None) -> None:
        """Start tracing (before a cell's code runs); a no-op while a cell is traced.
        ``sources``: the code of names whose cached text is not what was compiled (the
        findings read statements from it); others are read from ``linecache``."""
        if self._active is None:
            self._active = ActiveCell(self._scope_config, self.options, sources or {}, self._born)

    def abandon(self) -> None:
        """Stop tracing without recording (a cell that ``%%shapelens`` traces itself)."""
        active, self._active = self._active, None
        if active is not None:
            active.engine.stop()
            active.engine.close()

    def end(
        self, *, file: str, source: str, execution_count: int | None, error: BaseException | None
    ) -> CellRun | None:
        """Stop tracing the cell that ran as ``file`` with text ``source``, record what it
        gave and rewrite the trace file. None when no cell was being traced."""
        active, self._active = self._active, None
        if active is None:
            return None
        trace = active.finish(error, self.scope)
        self._born = [
            stats
            for stats in (*self._born, *active.records.all_stats)
            if stats.ref is not None and stats.ref() is not None
        ]
        cell = CellSource(
            file=file, source=source, execution_count=execution_count, executed_at=time.time()
        )
        self._record(cell, trace)
        return CellRun(cell=cell, trace=replace(trace, argv=(file,), cells=(cell,)))

    def clear(self) -> None:
        """Forget every cell's results (the file is rewritten empty)."""
        self._cells.clear()
        self._lines.clear()
        self._findings.clear()
        self._exception = None
        self._compile_mode = None
        self._duration = 0.0
        self._born = []
        self.cells_traced = 0
        self.write()

    def _record(self, cell: CellSource, trace: Trace) -> None:
        # The executed cell's own file is what this execution recorded. In other files (a
        # cell's function, a user module) each line keeps what the latest execution that ran
        # it saw: a later call that ran fewer of them (a compiled model, another branch)
        # does not wipe the others.
        ran_in = {line.file for line in trace.lines} | {f.file for f in trace.findings}
        ran_in.add(cell.file)
        for file in ran_in:
            lines = {line.line: line for line in trace.lines_of(file)}
            found = trace.findings_of(file)
            if file != cell.file:
                kept = self._lines.get(file, {})
                ran = set(lines)
                lines = {**{n: line for n, line in kept.items() if n not in ran}, **lines}
                earlier = [f for f in self._findings.get(file, ()) if f.line not in ran]
                found = [*earlier, *found]
            self._lines[file] = dict(sorted(lines.items()))
            self._findings[file] = tuple(found)
        if self._exception is not None and self._exception.file in ran_in:
            self._exception = None
        if trace.exception is not None:
            self._exception = trace.exception
        if trace.compile_mode is not None:
            self._compile_mode = trace.compile_mode
        self._cells.pop(cell.file, None)  # re-inserted last: the file lists cells by recency
        self._cells[cell.file] = cell
        self._duration += trace.duration_s
        self.cells_traced += 1
        self.write()

    def snapshot(self) -> Trace:
        """The whole session as one trace (what the file holds)."""
        return Trace(
            argv=(f"kernel {os.getpid()}",),
            python=".".join(map(str, sys.version_info[:3])),
            duration_s=self._duration,
            status="ok" if self._exception is None else "exception",
            exit_code=0 if self._exception is None else 1,
            exception=self._exception,
            lines=tuple(line for lines in self._lines.values() for line in lines.values()),
            findings=tuple(f for found in self._findings.values() for f in found),
            cells=tuple(self._cells.values()),
            compile_mode=self._compile_mode,
        )

    def write(self) -> None:
        """Rewrite the trace file; a folder we cannot write to is said once, on stderr, and
        never fails the user's cell."""
        try:
            write_trace(self.snapshot(), self.trace_path)
        except OSError as err:
            if not self._write_failed:
                self._write_failed = True
                print(
                    f"ShapeLens: cannot write {self.trace_path} ({err.strerror or err});"
                    f" set {TRACE_DIR_VARIABLE} to a folder you can write to",
                    file=sys.stderr,
                )


def _describe(error: BaseException, scope: UserCodeScope) -> ExceptionInfo:
    """The exception and the innermost line of user code it passed through."""
    file, line = scope.raised_at(error)
    try:
        message = str(error)
    except Exception:
        message = "<exception message could not be read>"
    return ExceptionInfo(type=type(error).__qualname__, message=message, file=file, line=line)
