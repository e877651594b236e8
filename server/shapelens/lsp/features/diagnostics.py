"""``textDocument/publishDiagnostics``: the run's exception and every finding."""

from __future__ import annotations

from collections.abc import Callable

from lsprotocol import types

from shapelens.lsp.features.lookup import binding_near
from shapelens.lsp.features.text import IDENTIFIER, line_range, line_text
from shapelens.lsp.results import FileView
from shapelens.lsp.shown import ShownFile
from shapelens.present.findings import finding_message, related_locations, run_ending
from shapelens.present.labels import var_label

SOURCE = "shapelens"
_SEVERITY = {
    "error": types.DiagnosticSeverity.Error,
    "warning": types.DiagnosticSeverity.Warning,
    "info": types.DiagnosticSeverity.Information,
}


def diagnostics_for(file: ShownFile, shown: Callable[[str], ShownFile]) -> list[types.Diagnostic]:
    """``file``'s diagnostics; ``shown`` gives the other files that related information
    points into (where an offending tensor was born)."""
    view = file.view
    if view is None:
        return []
    lines, document = file.lines, file.document
    found: list[types.Diagnostic] = []
    for line, finding in view.findings:
        related = []
        for location in related_locations(finding):
            other = file if location.file == file.path else shown(location.file)
            current = other.view.current_line(location.line) if other.view is not None else None
            if current is None:
                continue  # that line was edited since the run: don't point at the wrong one
            related.append(
                types.DiagnosticRelatedInformation(
                    location=types.Location(
                        uri=other.uri, range=line_range(other.lines, current, other.document)
                    ),
                    message=location.message,
                )
            )
        found.append(
            types.Diagnostic(
                range=line_range(lines, line, document),
                message=finding_message(finding),
                severity=_SEVERITY.get(finding.severity, types.DiagnosticSeverity.Warning),
                source=SOURCE,
                code=finding.kind,
                related_information=related or None,
            )
        )
    exc = view.results.exception
    if exc is not None and view.exception_line is not None:
        line = view.exception_line
        severity, kind, message = run_ending(view.results.status, exc)
        involved = _tensors_on_line(view, line_text(lines, line), line)
        if involved:
            message += "\n" + "\n".join(involved)
        found.append(
            types.Diagnostic(
                range=line_range(lines, line, document),
                message=message,
                severity=_SEVERITY[severity],
                source=SOURCE,
                code=kind,
            )
        )
    return found


def _tensors_on_line(view: FileView, text: str, line: int) -> list[str]:
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
