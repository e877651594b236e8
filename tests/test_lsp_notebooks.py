"""Notebook cells show what a Jupyter kernel traced (``%load_ext shapelens``).

The kernel rewrites ``.shapelens/kernel-*.json`` after each cell; the server watches it and
places each execution on the open cell whose text it executed (by content, not by position),
through the notebook sync of LSP 3.17. Nothing is run here: the traces are written by hand,
as the kernel writes them."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from lsprotocol import types

from shapelens.trace import ExceptionInfo, Finding, Trace, TracedLine, TracedVar
from shapelens.trace.codec import write_trace
from shapelens.trace.model import CellSource, Operand

from conftest import LspSession

A = "import torch\nx = torch.zeros(4, 3)\ny = x.sum(0)"
C = "z = x @ torch.ones(3, 2)\nw = z.t()\nv = w - z[:1].t()"
D = "q = torch.ones(5)\nbad = q + x"
E = "def never():\n    print('never executed')"
MARKDOWN = "# Shapes\nsome prose"

FILE_A = "/tmp/ipykernel_99/111.py"  # the names ipykernel compiles cells under
FILE_C = "/tmp/ipykernel_99/222.py"
FILE_D = "/tmp/ipykernel_99/333.py"


def _var(name: str, shape: tuple[int, ...]) -> TracedVar:
    return TracedVar(
        name=name, type="Tensor", shape=shape, dtype="float32", device="cpu",
        requires_grad=False, hits=1, shapes=(shape,),
    )  # fmt: skip


def _line(file: str, line: int, name: str, shape: tuple[int, ...]) -> TracedLine:
    return TracedLine(file=file, line=line, hits=1, vars=(_var(name, shape),))


def _cell(file: str, source: str, count: int, at: float) -> CellSource:
    return CellSource(file=file, source=source, execution_count=count, executed_at=at)


T0 = time.time() - 100


def kernel_trace(*extra_lines: TracedLine, cells: Sequence[CellSource] = ()) -> Trace:
    """A kernel session that ran A, C and D (D raised); ``cells`` and ``extra_lines`` add
    later executions."""
    return Trace(
        argv=("ipykernel",), python="python3", duration_s=1.0, status="exception", exit_code=1,
        lines=(
            _line(FILE_A, 2, "x", (4, 3)),
            _line(FILE_A, 3, "y", (3,)),
            _line(FILE_C, 1, "z", (4, 2)),
            _line(FILE_C, 2, "w", (2, 4)),
            _line(FILE_C, 3, "v", (2, 4)),
            _line(FILE_D, 1, "q", (5,)),
            *extra_lines,
        ),
        findings=(
            Finding(kind="broadcast", severity="warning", file=FILE_C, line=3,
                    note="broadcast: `w` (2, 4) - (2, 1) → (2, 4)"),
            Finding(kind="shape_mismatch", severity="error", file=FILE_D, line=2,
                    expression="bad = q + x", error="The size of tensor a (5) must match",
                    operands=(
                        Operand(name="q", shape=(5,), file=FILE_D, line=1),
                        Operand(name="x", shape=(4, 3), file=FILE_A, line=2),
                    )),
        ),
        exception=ExceptionInfo(
            type="RuntimeError", file=FILE_D, line=2,
            message="The size of tensor a (5) must match the size of tensor b (3)",
        ),
        cells=(
            _cell(FILE_A, A, 1, T0 + 1), _cell(FILE_C, C, 2, T0 + 2), _cell(FILE_D, D, 3, T0 + 3),
            *cells,
        ),
    )  # fmt: skip


class Notebook:
    """An open notebook: its cells' URIs by name and the versions the client sent."""

    def __init__(
        self, lsp: LspSession, cells: dict[str, tuple[str, str]], name: str = "analysis.ipynb"
    ) -> None:
        self.lsp = lsp
        self.path = lsp.root / name
        self.path.write_text("{}", encoding="utf-8")
        self.uri = self.path.as_uri()
        self.cells = {
            name: f"vscode-notebook-cell:{self.path}#W{i}sZmlsZQ%3D%3D"
            for i, name in enumerate(cells)
        }
        self.kinds = {name: kind for name, (kind, _) in cells.items()}
        self.version = 1
        lsp.client.notebook_document_did_open(
            types.DidOpenNotebookDocumentParams(
                notebook_document=types.NotebookDocument(
                    uri=self.uri, notebook_type="jupyter-notebook", version=1,
                    cells=[self._cell(name) for name in cells],
                ),
                cell_text_documents=[
                    types.TextDocumentItem(
                        uri=self.cells[name], version=1, text=text,
                        language_id="python" if kind == "code" else "markdown",
                    )
                    for name, (kind, text) in cells.items()
                ],
            )
        )  # fmt: skip

    def _cell(self, name: str) -> types.NotebookCell:
        kinds = types.NotebookCellKind
        kind = kinds.Code if self.kinds[name] == "code" else kinds.Markup
        return types.NotebookCell(kind=kind, document=self.cells[name])

    def change(
        self,
        structure: types.NotebookDocumentCellChangeStructure | None = None,
        text: Sequence[types.NotebookDocumentCellContentChanges] = (),
    ) -> None:
        self.version += 1
        self.lsp.client.notebook_document_did_change(
            types.DidChangeNotebookDocumentParams(
                notebook_document=types.VersionedNotebookDocumentIdentifier(
                    uri=self.uri, version=self.version
                ),
                change=types.NotebookDocumentChangeEvent(
                    cells=types.NotebookDocumentCellChanges(
                        structure=structure, text_content=list(text) or None
                    )
                ),
            )
        )

    def move(self, name: str, source: int, target: int) -> None:
        """VS Code moves a cell as a deletion and an insertion (no close, no open)."""
        structure, array = types.NotebookDocumentCellChangeStructure, types.NotebookCellArrayChange
        self.change(structure(array=array(start=source, delete_count=1, cells=[])))
        self.change(structure(array=array(start=target, delete_count=0, cells=[self._cell(name)])))

    def edit(
        self, name: str, version: int, start: tuple[int, int], end: tuple[int, int], text: str
    ) -> None:
        where = types.Range(types.Position(*start), types.Position(*end))
        cell = types.VersionedTextDocumentIdentifier(uri=self.cells[name], version=version)
        change = types.TextDocumentContentChangePartial(range=where, text=text)
        self.change(text=[types.NotebookDocumentCellContentChanges(cell, [change])])

    async def hints(self) -> dict[str, dict[int, str]]:
        return {
            name: await self.lsp.hints(uri)
            for name, uri in self.cells.items()
            if self.kinds[name] == "code"
        }


CELLS = {
    "A": ("code", A),
    "md": ("markdown", MARKDOWN),
    "C": ("code", C),
    "D": ("code", D),
    "E": ("code", E),
}
HINTS = {
    "A": {1: "x (4,3)", 2: "y (3,)"},
    "C": {0: "z (4,2)", 1: "w (2,4)", 2: "v (2,4)"},
    "D": {0: "q (5,)"},
    "E": {},
}


async def until(check: Callable[[], Any], timeout_s: float = 15.0) -> Any:
    """Polls an async ``check`` until it returns something true (the server polls files)."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = await check()
        if value or time.monotonic() > deadline:
            return value
        await asyncio.sleep(0.1)


def write_kernel_trace(root: Path, trace: Trace, name: str = "kernel-test.json") -> None:
    write_trace(trace, root / ".shapelens" / name)


def diagnostics(lsp: LspSession, uri: str) -> list[tuple[int, str]]:
    return [(d.range.start.line, str(d.code)) for d in lsp.client.diagnostics.get(uri, [])]


async def test_kernel_results_show_on_the_cells_that_ran_them(lsp: LspSession) -> None:
    notebook = Notebook(lsp, CELLS)
    assert await notebook.hints() == {name: {} for name in HINTS}  # nothing ran yet

    write_kernel_trace(lsp.root, kernel_trace())

    async def shown() -> bool:
        return await notebook.hints() == HINTS

    assert await until(shown), await notebook.hints()
    cells = notebook.cells
    # findings and the exception are diagnostics on the cell that ran them
    assert diagnostics(lsp, cells["C"]) == [(2, "broadcast")]
    assert diagnostics(lsp, cells["D"]) == [(1, "shape_mismatch"), (1, "exception")]
    assert diagnostics(lsp, cells["A"]) == []
    # where the operands were born: in this cell and in another one (A), on its cell URI
    [mismatch, _] = lsp.client.diagnostics[cells["D"]]
    born = mismatch.related_information or []
    related = [(r.location.uri, r.location.range.start.line) for r in born]
    assert related == [(cells["D"], 0), (cells["A"], 1)]
    assert cells["E"] not in lsp.client.diagnostics  # never ran: no message at all
    # decorations: the same traceUpdated payload as for files, on the cell URI
    [update] = [u for u in lsp.trace_updates if u["uri"] == cells["A"]][-1:]
    assert update["version"] == 1
    assert [(e["line"], e["label"]) for e in update["lines"]] == [(1, "x (4,3)"), (2, "y (3,)")]
    assert update["lines"][0]["vars"][0]["shape"] == [4, 3]
    [d_update] = [u for u in lsp.trace_updates if u["uri"] == cells["D"]][-1:]
    assert [f["kind"] for e in d_update["lines"] for f in e["findings"]] == [
        "shape_mismatch",
        "exception",
    ]
    # hover and the tooltip come from the cell's execution
    hover = await lsp.client.text_document_hover_async(
        types.HoverParams(
            text_document=types.TextDocumentIdentifier(uri=cells["A"]),
            position=types.Position(2, 5),  # the `x` of `y = x.sum(0)`
        )
    )
    assert hover is not None and "**x**" in hover.contents.value  # type: ignore[union-attr]
    assert "line 2: `x = torch.zeros(4, 3)`" in hover.contents.value  # type: ignore[union-attr]
    found = await lsp.client.text_document_inlay_hint_async(
        types.InlayHintParams(
            text_document=types.TextDocumentIdentifier(uri=cells["C"]),
            range=types.Range(types.Position(0, 0), types.Position(9, 0)),
        )
    )
    resolved = await lsp.client.inlay_hint_resolve_async((found or [])[0])
    assert "**z**" in resolved.tooltip.value  # type: ignore[union-attr]


async def test_a_module_the_cells_imported_shows_its_lines(lsp: LspSession) -> None:
    """The kernel traced a user module a cell called into: the module's file shows them,
    as after a script run, and loses them when the trace file goes."""
    module, uri = lsp.write(
        "helpers.py", "import torch\n\n\ndef grow(t):\n    big = t.repeat(2, 1)\n    return big\n"
    )
    lsp.open(module)
    notebook = Notebook(lsp, CELLS)
    trace = kernel_trace(_line(str(module), 5, "big", (8, 3)))
    write_kernel_trace(lsp.root, trace)

    async def module_hints() -> dict[int, str]:
        return await lsp.hints(uri)

    assert await until(module_hints) == {4: "big (8,3)"}
    assert (await notebook.hints())["A"] == HINTS["A"]  # the cells as before
    (lsp.root / ".shapelens" / "kernel-test.json").unlink()

    async def module_cleared() -> bool:
        return await lsp.hints(uri) == {}

    assert await until(module_cleared)


async def test_results_follow_cells_through_reordering_and_edits(lsp: LspSession) -> None:
    notebook = Notebook(lsp, CELLS)
    write_kernel_trace(lsp.root, kernel_trace())

    async def shown() -> bool:
        return await notebook.hints() == HINTS

    assert await until(shown), await notebook.hints()
    cells = notebook.cells

    # C moves to the top, a comment goes above A's code and A's `y` line is edited
    notebook.move("C", 2, 0)
    notebook.edit("A", 2, (0, 0), (0, 0), "# setup\n")
    notebook.edit("A", 3, (3, 10), (3, 11), "1")  # y = x.sum(1): not what ran
    expected = {**HINTS, "A": {2: "x (4,3)"}}

    async def followed() -> bool:
        return await notebook.hints() == expected

    assert await until(followed), await notebook.hints()

    async def republished() -> bool:
        return diagnostics(lsp, cells["C"]) == [(2, "broadcast")] and any(
            u["uri"] == cells["A"] and u["version"] == 3 for u in lsp.trace_updates
        )

    assert await until(republished)
    assert diagnostics(lsp, cells["D"]) == [(1, "shape_mismatch"), (1, "exception")]

    # C is edited beyond recognition: its results go (and its diagnostic with them)
    notebook.edit("C", 2, (0, 0), (3, 0), "print('something else')")

    async def gone() -> bool:
        return (
            (await notebook.hints())["C"] == {}
            and cells["C"] in lsp.client.diagnostics
            and (diagnostics(lsp, cells["C"]) == [])
        )

    assert await until(gone), (await notebook.hints(), lsp.client.diagnostics.get(cells["C"]))


async def test_the_latest_execution_wins(lsp: LspSession) -> None:
    notebook = Notebook(lsp, CELLS)
    write_kernel_trace(lsp.root, kernel_trace())

    async def shown() -> bool:
        return await notebook.hints() == HINTS

    assert await until(shown), await notebook.hints()

    # A is edited and run again in the same session: a new name, a new shape, later
    notebook.edit("A", 2, (1, 16), (1, 17), "8")  # x = torch.zeros(8, 3)
    edited_a = "import torch\nx = torch.zeros(8, 3)\ny = x.sum(0)"
    rerun = "/tmp/ipykernel_99/444.py"
    write_kernel_trace(
        lsp.root,
        kernel_trace(
            _line(rerun, 2, "x", (8, 3)),
            _line(rerun, 3, "y", (3,)),
            cells=[_cell(rerun, edited_a, 4, T0 + 4)],
        ),
    )
    expected = {**HINTS, "A": {1: "x (8,3)", 2: "y (3,)"}}

    async def rerun_shown() -> bool:
        return await notebook.hints() == expected

    assert await until(rerun_shown), await notebook.hints()

    # the kernel restarts (another session file) and runs C unchanged on other data:
    # the same source executed twice, the later one is shown
    restarted = "/tmp/ipykernel_100/222.py"
    write_kernel_trace(
        lsp.root,
        Trace(
            argv=("ipykernel",), python="python3", duration_s=1.0, status="ok", exit_code=0,
            lines=(
                _line(restarted, 1, "z", (6, 2)),
                _line(restarted, 2, "w", (2, 6)),
                _line(restarted, 3, "v", (2, 6)),
            ),
            cells=(_cell(restarted, C, 1, T0 + 50),),
        ),
        name="kernel-restarted.json",
    )  # fmt: skip
    expected["C"] = {0: "z (6,2)", 1: "w (2,6)", 2: "v (2,6)"}

    async def restart_shown() -> bool:
        return await notebook.hints() == expected

    assert await until(restart_shown), await notebook.hints()
    # that session found no broadcast in C: the older session's finding is not shown on it
    assert diagnostics(lsp, notebook.cells["C"]) == []


async def test_bad_input_gets_empty_answers(lsp: LspSession) -> None:
    (lsp.root / ".shapelens").mkdir()
    (lsp.root / ".shapelens" / "kernel-broken.json").write_text("{ half a trace", "utf-8")
    (lsp.root / ".shapelens" / "kernel-other.json").write_text('{"schema": "x"}', "utf-8")
    only_prose = Notebook(lsp, {"md": ("markdown", MARKDOWN)}, name="prose.ipynb")
    del only_prose
    lsp.client.notebook_document_did_open(
        types.DidOpenNotebookDocumentParams(
            notebook_document=types.NotebookDocument(
                uri=(lsp.root / "empty.ipynb").as_uri(), notebook_type="jupyter-notebook",
                version=1, cells=[],
            ),
            cell_text_documents=[],
        )
    )  # fmt: skip
    unknown = f"vscode-notebook-cell:{lsp.root}/nowhere.ipynb#W0sZmlsZQ%3D%3D"
    assert await lsp.hints(unknown) == {}
    hover = await lsp.client.text_document_hover_async(
        types.HoverParams(
            text_document=types.TextDocumentIdentifier(uri=unknown), position=types.Position(0, 0)
        )
    )
    assert hover is None
    notebook = Notebook(lsp, CELLS)
    write_kernel_trace(lsp.root, kernel_trace())

    async def shown() -> bool:
        return await notebook.hints() == HINTS

    assert await until(shown), await notebook.hints()
    lenses = await lsp.client.text_document_code_lens_async(
        types.CodeLensParams(text_document=types.TextDocumentIdentifier(uri=notebook.cells["E"]))
    )
    assert not lenses  # a cell runs in its kernel: no "Run with ShapeLens" in it
    for position in (types.Position(99, 0), types.Position(1, 999)):
        hover = await lsp.client.text_document_hover_async(
            types.HoverParams(
                text_document=types.TextDocumentIdentifier(uri=notebook.cells["A"]),
                position=position,
            )
        )
        assert hover is None
    # the trace file goes away (the folder too): the results go with it
    for path in (lsp.root / ".shapelens").iterdir():
        path.unlink()
    (lsp.root / ".shapelens").rmdir()

    async def cleared() -> bool:
        return await notebook.hints() == {name: {} for name in HINTS}

    assert await until(cleared), await notebook.hints()
    # closing the notebook withdraws its diagnostics; the server stays up
    lsp.client.notebook_document_did_close(
        types.DidCloseNotebookDocumentParams(
            notebook_document=types.NotebookDocumentIdentifier(uri=notebook.uri),
            cell_text_documents=[
                types.TextDocumentIdentifier(uri=uri) for uri in notebook.cells.values()
            ],
        )
    )
    assert await lsp.hints(notebook.cells["A"]) == {}


async def test_cells_without_notebook_sync_and_the_trace_dir_setting(
    lsp: LspSession, tmp_path_factory: Any
) -> None:
    """A client that opens cells as plain text documents still gets their results, and
    ``shapelens.traceDir`` adds a folder ($SHAPELENS_TRACE_DIR works the same way)."""
    elsewhere = tmp_path_factory.mktemp("kernel-traces")
    lsp.client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(settings={"shapelens": {"traceDir": str(elsewhere)}})
    )
    uri = f"vscode-notebook-cell:{lsp.root}/plain.ipynb#W0sZmlsZQ%3D%3D"
    lsp.client.text_document_did_open(
        types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(uri=uri, language_id="python", version=1, text=C)
        )
    )
    write_trace(kernel_trace(), elsewhere / "kernel-elsewhere.json")

    async def shown() -> bool:
        return await lsp.hints(uri) == HINTS["C"]

    assert await until(shown), await lsp.hints(uri)

    async def published() -> bool:  # diagnostics are a notification of their own
        return diagnostics(lsp, uri) == [(2, "broadcast")]

    assert await until(published), diagnostics(lsp, uri)


def test_trace_dirs_and_placement_by_content() -> None:
    """The pure parts: which folders are watched, and which execution a cell shows."""
    from shapelens.lsp.kernel_traces import trace_dirs
    from shapelens.lsp.notebooks import NotebookResults

    assert trace_dirs(["/w"], ["/w", "/n"], "/env/traces", "sub") == [
        "/w/.shapelens",
        "/n/.shapelens",
        "/env/traces",
        "/w/sub",
    ]
    results = NotebookResults()
    results.load("/k1.json", kernel_trace())
    cells = [("a", A), ("copy", A.replace("zeros(4, 3)", "ones(4, 3)")), ("e", E)]
    placed = results.place("nb", cells)
    assert placed["a"] is not None and placed["a"].cell.file == FILE_A
    assert placed["copy"] is None  # A's execution is A's: its edited copy never ran
    assert placed["e"] is None
    alone = results.place("nb", cells[1:])  # without A, the copy is A edited
    assert alone["copy"] is not None and alone["copy"].cell.file == FILE_A
    view = results.view(alone["copy"], cells[1][1].splitlines(keepends=True))
    assert view is not None and sorted(view.lines) == [2]  # only the unchanged `y` line


def test_notebook_sync_is_offered_to_clients_that_sync_notebooks() -> None:
    """VS Code (vscode-languageclient 8+) syncs notebooks; the fixture's older capability
    file says nothing about notebooks, so the advertisement is checked here directly."""
    from pygls.capabilities import ServerCapabilitiesBuilder
    from pytest_lsp import client_capabilities

    from shapelens.lsp.server import create_server

    server = create_server()
    capabilities = client_capabilities("visual-studio-code")
    capabilities.notebook_document = types.NotebookDocumentClientCapabilities(
        synchronization=types.NotebookDocumentSyncClientCapabilities()
    )
    built = ServerCapabilitiesBuilder(
        capabilities,
        set(server.protocol.fm.features),
        {},
        [],
        types.TextDocumentSyncKind.Incremental,
        server._notebook_document_sync,
    ).build()
    sync = built.notebook_document_sync
    assert isinstance(sync, types.NotebookDocumentSyncOptions)
    [selector] = sync.notebook_selector
    assert isinstance(selector, types.NotebookDocumentFilterWithCells)
    assert (selector.notebook, [c.language for c in selector.cells]) == ("*", ["python"])
    assert types.NOTEBOOK_DOCUMENT_DID_CHANGE in server.protocol.fm.features
