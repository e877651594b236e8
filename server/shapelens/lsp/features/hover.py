"""``textDocument/hover``: the full story of a traced variable, or of a traced line."""

from __future__ import annotations

from lsprotocol import types

from shapelens.lsp.features.lookup import binding_near
from shapelens.lsp.features.text import end_of_line, line_text
from shapelens.lsp.server import ShapeLensServer
from shapelens.present.markdown import var_table

_LINE_KEYWORDS = {"def", "return", "yield", "class", "for", "with", ""}


def register(server: ShapeLensServer) -> None:
    @server.feature(types.TEXT_DOCUMENT_HOVER)
    def hover(ls: ShapeLensServer, params: types.HoverParams) -> types.Hover | None:
        document = ls.open_document(params.text_document.uri)
        if document is None or not 0 <= params.position.line < len(document.lines):
            return None
        view = ls.view_of(document)
        if view is None:
            return None
        line = params.position.line
        if params.position.character > end_of_line(document, document.lines, line).character:
            return None  # past the end of the line: an empty answer, not a guess
        try:
            word = document.word_at_position(params.position)
        except (IndexError, ValueError):
            return None
        sections: list[str] = []
        found = None if word in _LINE_KEYWORDS else binding_near(view, word, line)
        if found is not None:
            bound_line, var = found
            traced = view.lines[bound_line]
            entries = [
                v
                for v in traced.vars
                if v.name == word or v.name.startswith((word + "[", word + "."))
            ]
            born = f"line {bound_line + 1}: `{line_text(document.lines, bound_line).strip()}`"
            sections += [var_table(v, born=born) for v in entries or [var]]
            findings_line = bound_line
        elif line in view.lines:
            sections += [var_table(v) for v in view.lines[line].vars]
            findings_line = line
        else:
            return None
        for current, finding in view.findings:
            if current == findings_line or f"`{word}`" in finding.message:
                mark = {"error": "✖", "warning": "⚠"}.get(finding.severity, "ℹ")
                sections.append(
                    f"{mark} **{finding.kind}** (line {current + 1}): {finding.message}"
                )
        if not sections:
            return None
        return types.Hover(
            contents=types.MarkupContent(
                kind=types.MarkupKind.Markdown, value="\n\n---\n\n".join(sections)
            )
        )
