"""``%load_ext shapelens``: the IPython side of notebook tracing.

Loading the extension traces every cell the kernel runs from then on (``pre_run_cell`` starts
the engine, ``post_run_cell`` stops it and rewrites the session's trace file), in the kernel's
own process. Nothing is caught: a failing cell fails as it would without ShapeLens.

- ``%shapelens on|off|clear|status`` controls it;
- ``%%shapelens`` traces one cell (also while off) and shows its annotated listing as the
  cell's output: HTML in Jupyter, plain text in terminal IPython.
"""

from __future__ import annotations

import linecache
import os
import sys
from collections.abc import Mapping
from typing import Any

from IPython.core.magic import Magics, cell_magic, line_magic, magics_class
from IPython.display import display

from shapelens.engine.backends.choice import choose_backend
from shapelens.notebook.session import CellRun, KernelSession
from shapelens.present.listing import render_listing, render_listing_html
from shapelens.trace.model import Trace

_USAGE = "usage: %shapelens on | off | clear | status   (%%shapelens traces one cell)"


class ListingView:
    """A cell's annotated listing, as the front end can show it (HTML or plain text)."""

    def __init__(self, trace: Trace, names: Mapping[str, str]) -> None:
        self.trace = trace
        self.names = dict(names)

    def _repr_html_(self) -> str:
        return render_listing_html(self.trace, names=self.names)

    def __repr__(self) -> str:
        return render_listing(self.trace, color=False, names=self.names).rstrip("\n")

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(repr(self))


def cell_name_patterns(shell: Any) -> list[str]:
    """What the kernel names its cells: ipykernel compiles each into a file of its own
    directory (``/tmp/ipykernel_42/123.py``), terminal IPython as ``<ipython-input-N-…>``."""
    example = str(shell.compile.get_code_name("", "", 0))
    if example.startswith("<"):
        return [example[: example.index("-", example.index("input")) + 1] + "*"]
    return [os.path.join(os.path.dirname(example), "*")]


@magics_class
class ShapeLensMagics(Magics):
    def __init__(self, shell: Any, session: KernelSession) -> None:
        super().__init__(shell)
        self.session = session
        self._raw_cell: str | None = None
        self._count: int | None = None

    # -- events ------------------------------------------------------------------------
    def pre_run_cell(self, info: Any) -> None:
        self._raw_cell = info.raw_cell
        self._count = self.shell.execution_count if self.shell is not None else None
        if self.session.enabled:
            self.session.begin()

    def post_run_cell(self, result: Any) -> None:
        raw = result.info.raw_cell if result.info is not None else (self._raw_cell or "")
        self._end_cell(raw, result.execution_count, result.error_in_exec)

    def _end_cell(self, raw: str, count: int | None, error: BaseException | None) -> CellRun | None:
        if not self.session.tracing:
            return None
        return self.session.end(
            file=self._name_of(raw, count), source=raw, execution_count=count, error=error
        )

    def _name_of(self, raw: str, count: int | None) -> str:
        """The name the kernel compiled this cell under (as ``run_cell`` computes it)."""
        shell: Any = self.shell
        return str(shell.compile.get_code_name(raw, shell.transform_cell(raw), count or 0))

    # -- magics ------------------------------------------------------------------------
    @line_magic  # type: ignore[untyped-decorator,unused-ignore]
    def shapelens(self, line: str) -> None:
        """%shapelens on | off | clear | status"""
        command = line.strip() or "status"
        session = self.session
        if command == "on":
            session.enabled = True
            print("ShapeLens: tracing every cell from the next one on")
        elif command == "off":
            session.abandon()  # nor this cell
            session.enabled = False
            print("ShapeLens: off (%shapelens on to trace again; %%shapelens traces one cell)")
        elif command == "clear":
            session.abandon()  # the cell that clears leaves nothing behind either
            session.clear()
            print(f"ShapeLens: results cleared ({session.trace_path})")
        elif command == "status":
            print(status_text(session))
        else:
            print(_USAGE, file=sys.stderr)

    @cell_magic("shapelens")  # type: ignore[arg-type]  # IPython types the name form poorly
    def shapelens_cell(self, line: str, cell: str) -> None:
        """%%shapelens: trace this cell and show its annotated listing."""
        __tracebackhide__ = True  # IPython leaves this frame out of the cell's traceback
        shell: Any = self.shell
        session = self.session
        session.abandon()  # this cell is traced here, under its own code
        raw = self._raw_cell or f"%%shapelens {line}".rstrip() + "\n" + cell
        count = self._count if self._raw_cell is not None else shell.execution_count
        name = self._name_of(raw, count)
        # Line 1 is the %%shapelens line: the body keeps its line numbers in the cell.
        body = "\n" + shell.transform_cell(cell)
        code = shell.compile(body, name, "exec")
        # Tracebacks and the listing show the cell as written; the engine reads the code.
        linecache.cache[name] = (len(raw), None, raw.splitlines(keepends=True), name)
        error: BaseException | None = None
        session.begin({name: body})
        try:
            exec(code, shell.user_ns)
        except BaseException as err:  # shown in the listing, then raised as it was
            error = err
        finally:
            run = session.end(file=name, source=raw, execution_count=count, error=error)
        if run is not None:
            display(ListingView(run.trace, {name: f"cell [{count}]"}))  # type: ignore[no-untyped-call]
        if error is not None:
            raise error


def status_text(session: KernelSession) -> str:
    state = "on: every cell is traced" if session.enabled else "off"
    backend = f"sys.{choose_backend().kind}"
    return (
        f"ShapeLens {state} ({backend}); {session.cells_traced} cell run(s) traced;"
        f" trace file {session.trace_path}"
    )


_LOADED: dict[int, ShapeLensMagics] = {}


def load(shell: Any) -> None:
    """``%load_ext shapelens`` (again: nothing more happens)."""
    if id(shell) in _LOADED:
        return
    session = KernelSession(cwd=os.getcwd(), cell_files=cell_name_patterns(shell))
    magics = ShapeLensMagics(shell, session)
    shell.register_magics(magics)
    shell.events.register("pre_run_cell", magics.pre_run_cell)
    shell.events.register("post_run_cell", magics.post_run_cell)
    _LOADED[id(shell)] = magics
    session.write()  # editors see the session before its first cell ends
    print(f"ShapeLens: tracing every cell; results in {session.trace_path}")


def unload(shell: Any) -> None:
    """``%unload_ext shapelens``: stop tracing; the trace file stays."""
    magics = _LOADED.pop(id(shell), None)
    if magics is None:
        return
    magics.session.abandon()
    shell.events.unregister("pre_run_cell", magics.pre_run_cell)
    shell.events.unregister("post_run_cell", magics.post_run_cell)
