"""``textDocument/publishDiagnostics``: the run's exception and every finding."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lsprotocol import types

from shapelens.lsp.features.lookup import binding_near
from shapelens.lsp.features.text import IDENTIFIER, line_range, line_text
from shapelens.present.labels import var_label

if TYPE_CHECKING:
    from shapelens.lsp.server import ShapeLensServer

SOURCE = "shapelens"
_SEVERITY = {
    "error": types.DiagnosticSeverity.Error,
    "warning": types.DiagnosticSeverity.Warning,
    "info": types.DiagnosticSeverity.Information,
}


def diagnostics_for(server: ShapeLensServer, path: str) -> list[types.Diagnostic]:
    view = server.view_of_path(path)
    if view is None:
        return []
    document = server.document_for_path(path)
    lines = document.lines if document is not None else view.results.source
    found: list[types.Diagnostic] = []
    for line, finding in view.findings:
        related = []
        for location in finding.related:
            other = server.view_of_path(location.file) if location.file != path else view
            current = other.current_line(location.line) if other is not None else None
            if current is None:
                continue  # that line was edited since the run: don't point at the wrong one
            other_doc = server.document_for_path(location.file)
            other_lines = (
                other_doc.lines if other_doc is not None else other.results.source  # type: ignore[union-attr]
            )
            related.append(
                types.DiagnosticRelatedInformation(
                    location=types.Location(
                        uri=server.uri_for_path(location.file),
                        range=line_range(other_lines, current, other_doc),
                    ),
                    message=location.message,
                )
            )
        found.append(
            types.Diagnostic(
                range=line_range(lines, line, document),
                message=finding.message,
                severity=_SEVERITY.get(finding.severity, types.DiagnosticSeverity.Warning),
                source=SOURCE,
                code=finding.kind,
                related_information=related or None,
            )
        )
    exc = view.results.exception
    if exc is not None and view.exception_line is not None:
        line = view.exception_line
        message = f"{exc.type}: {exc.message.strip()}" if exc.message.strip() else exc.type
        involved = _tensors_on_line(view, line_text(lines, line), line)
        if involved:
            message += "\n" + "\n".join(involved)
        found.append(
            types.Diagnostic(
                range=line_range(lines, line, document),
                message=message,
                severity=types.DiagnosticSeverity.Error,
                source=SOURCE,
                code="exception",
            )
        )
    return found


def _tensors_on_line(view, text: str, line: int) -> list[str]:  # type: ignore[no-untyped-def]
    """Metadata of the tensors the failing line names, as last bound at or above it."""
    described: list[str] = []
    seen: set[str] = set()
    for name in IDENTIFIER.findall(text):
        if name in seen:
            continue
        seen.add(name)
        found = binding_near(view, name, line)
        if found is not None and found[0] <= line:
            described.append(f"  {var_label(found[1])}  (line {found[0] + 1})")
    return described
