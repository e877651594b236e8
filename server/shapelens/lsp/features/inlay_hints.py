"""``textDocument/inlayHint``: one hint at the end of each traced line in the range."""

from __future__ import annotations

from lsprotocol import types

from shapelens.lsp.features.text import end_of_line
from shapelens.lsp.server import ShapeLensServer
from shapelens.present.labels import line_label, var_label
from shapelens.present.markdown import var_table


def register(server: ShapeLensServer) -> None:
    @server.feature(types.TEXT_DOCUMENT_INLAY_HINT)
    def inlay_hints(ls: ShapeLensServer, params: types.InlayHintParams) -> list[types.InlayHint]:
        document = ls.open_document(params.text_document.uri)
        if document is None:
            return []
        view = ls.view_of(document)
        if view is None:
            return []
        first, last = params.range.start.line, params.range.end.line
        limit = ls.settings.max_hint_length
        hints = []
        for line, traced in sorted(view.lines.items()):
            if not first <= line <= last or line >= len(document.lines):
                continue
            label = (
                line_label(traced)
                if ls.settings.hint_format == "compact"
                else "  ".join(var_label(v) for v in traced.vars)
            )
            if not label:
                continue
            if len(label) > limit:
                label = label[: limit - 1] + "…"
            hints.append(
                types.InlayHint(
                    position=end_of_line(document, line),
                    label=label,
                    padding_left=True,
                    tooltip=types.MarkupContent(
                        kind=types.MarkupKind.Markdown,
                        value="\n\n".join(var_table(v) for v in traced.vars),
                    ),
                )
            )
        return hints
