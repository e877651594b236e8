"""``textDocument/inlayHint``: one hint at the end of each traced line in the range.

Tooltips (markdown tables) are built only when the client asks: ``inlayHint/resolve``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lsprotocol import types
from pygls.workspace import TextDocument

from shapelens.lsp.features.text import end_of_line
from shapelens.lsp.results import FileView
from shapelens.lsp.settings import Settings
from shapelens.present.markdown import var_table
from shapelens.trace import TracedLine

HintCache = dict[tuple[object, ...], dict[int, types.InlayHint | None]]
"""Hints per line of one document version, run and format: editors ask on every scroll."""


def inlay_hints_for(
    view: FileView,
    document: TextDocument,
    lines_range: types.Range,
    settings: Settings,
    cache: HintCache,
) -> list[types.InlayHint]:
    first, last = lines_range.start.line, lines_range.end.line
    lines = document.lines
    # The run number, never id(view): a re-run of unchanged text frees the old view and
    # the new one may reuse its id, which answered with the previous run's hints.
    # The path too: a notebook cell may be shown another execution of the same kernel
    # trace (one run) when another cell claims its first one.
    key = (
        document.uri,
        document.version,
        view.results.run,
        view.results.path,
        settings.hints.max_hint_length,
        settings.hint_style,
    )
    built = cache.get(key)
    if built is None:
        cache.clear()  # one document version at a time is what editors ask about
        built = cache[key] = {}
    hints = []
    for line in sorted(view.lines):
        if not first <= line <= last or line >= len(lines):
            continue
        if line not in built:
            built[line] = _hint(document, view, lines, line, view.lines[line], settings)
        hint = built[line]
        if hint is not None:
            hints.append(hint)
    return hints


def _hint(document: TextDocument, view: FileView, lines: Sequence[str], line: int,
          traced: TracedLine, settings: Settings) -> types.InlayHint | None:  # fmt: skip
    label = view.results.hints.label(traced, settings.hint_style)
    if not label:
        return None
    limit = settings.hints.max_hint_length
    if len(label) > limit:
        label = label[: limit - 1] + "…"
    return types.InlayHint(
        position=end_of_line(document, lines, line),
        label=label,
        padding_left=True,
        data={
            "uri": document.uri,
            "version": document.version,
            "run": view.results.run,
            "line": line,
        },
    )


def hint_document(hint: types.InlayHint) -> str:
    """The URI of the document a hint of ours was built for ("" for anyone else's)."""
    return str(_data(hint).get("uri", ""))


def resolve_hint(
    hint: types.InlayHint, document: TextDocument, view: FileView | None
) -> types.InlayHint:
    """``hint`` with its tooltip, when ``document`` and ``view`` are still what it showed."""
    data = _data(hint)
    if document.version != data.get("version"):
        return hint  # edited since: no tooltip rather than a wrong one
    if view is None or view.results.run != data.get("run"):
        return hint  # ran again since: a tooltip now would describe another run
    traced = view.lines.get(data.get("line", -1))
    if traced is not None:
        hint.tooltip = types.MarkupContent(
            kind=types.MarkupKind.Markdown,
            value="\n\n".join(var_table(v, sampled=traced.sampled) for v in traced.vars),
        )
    return hint


def _data(hint: types.InlayHint) -> dict[str, Any]:
    return hint.data if isinstance(hint.data, dict) else {}
