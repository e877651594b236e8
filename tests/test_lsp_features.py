"""The LSP features as pure functions: a file's view and its document in, LSP objects out.

No server, no client: a result store, a document and the feature (the end-to-end tests
over stdio cover the wiring)."""

from __future__ import annotations

from lsprotocol import types
from pygls.workspace import TextDocument

from shapelens.lsp.features.diagnostics import diagnostics_for
from shapelens.lsp.features.hover import hover_for
from shapelens.lsp.features.inlay_hints import HintCache, inlay_hints_for, resolve_hint
from shapelens.lsp.features.trace_updates import trace_update_for
from shapelens.lsp.results import ResultStore
from shapelens.lsp.settings import Settings
from shapelens.lsp.shown import ShownFile
from shapelens.present.labels import HintStyle
from shapelens.trace import Finding, RelatedLocation, Trace, TracedLine, TracedVar

MAIN = ("import numpy as np\n", "x = np.zeros((4, 1))\n", "y = x - np.zeros(4)\n")
DATA = ("import numpy as np\n", "def make():\n", "    return np.zeros(4)\n")


def _var(name: str, shape: tuple[int, ...]) -> TracedVar:
    return TracedVar(
        name=name, type="ndarray", shape=shape, dtype="float64", device="cpu",
        requires_grad=None, hits=1, shapes=(shape,),
    )  # fmt: skip


def _store(runs: int = 1) -> ResultStore:
    finding = Finding(
        kind="broadcast", severity="warning", file="/w/main.py", line=3,
        note="broadcast: `x` (4, 1) - (4,) → (4, 4)",
        related=(RelatedLocation(file="/w/data.py", line=3, message="(4,) born here"),),
    )  # fmt: skip
    trace = Trace(
        argv=("main.py",), python="python3", duration_s=0.1, status="ok", exit_code=0,
        lines=(
            TracedLine(file="/w/main.py", line=2, hits=1, vars=(_var("x", (4, 1)),)),
            TracedLine(file="/w/main.py", line=3, hits=1, vars=(_var("y", (4, 4)),)),
        ),
        findings=(finding,),
    )  # fmt: skip
    store = ResultStore()
    for _ in range(runs):
        store.update(trace, {"/w/main.py": MAIN, "/w/data.py": DATA}, owner="/w/main.py")
    return store


def _document(lines: tuple[str, ...], version: int = 1) -> TextDocument:
    return TextDocument("file:///w/main.py", "".join(lines), version=version)


def test_diagnostics_point_into_other_files_on_their_current_lines() -> None:
    store = _store()
    document = _document(MAIN)
    main = ShownFile(
        path="/w/main.py", uri=document.uri, document=document,
        view=store.view("/w/main.py", 1, document.lines), lines=document.lines,
    )  # fmt: skip

    def shown(path: str, data: tuple[str, ...] = DATA) -> ShownFile:
        view = store.view(path, None, data)
        return ShownFile(path=path, uri="file://" + path, document=None, view=view, lines=data)

    [found] = diagnostics_for(main, shown)
    assert (found.code, found.range.start.line, found.source) == ("broadcast", 2, "shapelens")
    [related] = found.related_information or []
    assert (related.location.uri, related.location.range.start.line) == ("file:///w/data.py", 2)

    edited = ("import numpy as np\n", "def make():\n", "    return np.ones(4)\n")
    [found] = diagnostics_for(main, lambda path: shown(path, edited))
    assert found.related_information is None  # never a line whose text differs


def test_trace_update_hover_and_hints_follow_the_document() -> None:
    store = _store()
    document = _document(("# a comment\n", *MAIN), version=2)
    view = store.view("/w/main.py", 2, document.lines)
    assert view is not None

    update = trace_update_for(view, document, HintStyle())
    labels = [(2, "x (4,1)"), (3, "y (4,4)")]  # one line down: the comment
    assert [(e["line"], e["label"]) for e in update["lines"]] == labels
    assert update["lines"][1]["findings"][0]["kind"] == "broadcast"
    assert trace_update_for(None, document, HintStyle())["lines"] == []

    hover = hover_for(view, document, types.Position(line=3, character=8))
    assert hover is not None and "(4, 1)" in str(hover.contents)
    assert hover_for(view, document, types.Position(line=3, character=80)) is None

    cache: HintCache = {}
    everything = types.Range(types.Position(0, 0), types.Position(9, 0))
    hints = inlay_hints_for(view, document, everything, Settings(), cache)
    assert [(h.position.line, h.label) for h in hints] == labels
    assert inlay_hints_for(view, document, everything, Settings(), cache)[0] is hints[0]
    assert resolve_hint(hints[0], document, view).tooltip is not None
    rerun = _store(runs=2).view("/w/main.py", 2, document.lines)  # same text, a later run
    assert resolve_hint(hints[1], document, rerun).tooltip is None
