"""``textDocument/inlayHint``: one hint at the end of each traced line in the range.

Tooltips (markdown tables) are built only when the client asks: ``inlayHint/resolve``."""

from __future__ import annotations

from collections.abc import Sequence

from lsprotocol import types
from pygls.workspace import TextDocument

from shapelens.lsp.features.text import end_of_line
from shapelens.lsp.server import ShapeLensServer
from shapelens.present.labels import line_label, var_label
from shapelens.present.markdown import var_table
from shapelens.trace import TracedLine


def register(server: ShapeLensServer) -> None:
    # Hints per line of one document version: editors ask again on every scroll.
    cache: dict[tuple[object, ...], dict[int, types.InlayHint | None]] = {}

    @server.feature(types.TEXT_DOCUMENT_INLAY_HINT)
    def inlay_hints(ls: ShapeLensServer, params: types.InlayHintParams) -> list[types.InlayHint]:
        document = ls.open_document(params.text_document.uri)
        if document is None:
            return []
        view = ls.view_of(document)
        if view is None:
            return []
        first, last = params.range.start.line, params.range.end.line
        lines = document.lines
        settings = ls.settings
        key = (
            document.uri,
            document.version,
            id(view),
            settings.max_hint_length,
            settings.hint_format,
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
                built[line] = _hint(ls, document, lines, line, view.lines[line])
            hint = built[line]
            if hint is not None:
                hints.append(hint)
        return hints

    def _hint(ls: ShapeLensServer, document: TextDocument, lines: Sequence[str], line: int,
              traced: TracedLine) -> types.InlayHint | None:  # fmt: skip
        label = (
            line_label(traced)
            if ls.settings.hint_format == "compact"
            else "  ".join(var_label(v) for v in traced.vars)
        )
        if not label:
            return None
        limit = ls.settings.max_hint_length
        if len(label) > limit:
            label = label[: limit - 1] + "…"
        return types.InlayHint(
            position=end_of_line(document, lines, line),
            label=label,
            padding_left=True,
            data={"uri": document.uri, "version": document.version, "line": line},
        )

    @server.feature(types.INLAY_HINT_RESOLVE)
    def resolve(ls: ShapeLensServer, hint: types.InlayHint) -> types.InlayHint:
        data = hint.data if isinstance(hint.data, dict) else {}
        document = ls.open_document(str(data.get("uri", "")))
        if document is None or document.version != data.get("version"):
            return hint  # edited since: no tooltip rather than a wrong one
        view = ls.view_of(document)
        traced = view.lines.get(data.get("line", -1)) if view is not None else None
        if traced is not None:
            hint.tooltip = types.MarkupContent(
                kind=types.MarkupKind.Markdown,
                value="\n\n".join(var_table(v) for v in traced.vars),
            )
        return hint
