"""``shapelens/traceUpdated``: every hint of one document in one message (for decorations).

Params: ``{uri, version, lines: [{line, label, vars, findings}]}`` with 0-based ``line`` on
the document as it is at ``version``. ``label`` is the compact hint; ``vars`` the full data;
``findings`` the kinds and severities on that line (the extension colours by them).
"""

from __future__ import annotations

from typing import Any

from pygls.workspace import TextDocument

from shapelens.lsp.results import FileView
from shapelens.present.findings import finding_message, run_ending
from shapelens.present.labels import HintStyle
from shapelens.trace.codec import var_to_json


def trace_update_for(
    view: FileView | None, document: TextDocument, style: HintStyle
) -> dict[str, Any]:
    """The params for ``document`` (no lines when ``view`` is None: its results were cleared)."""
    lines: dict[int, dict[str, Any]] = {}
    if view is not None:
        for current, traced in sorted(view.lines.items()):
            lines[current] = {
                "line": current,
                "label": view.results.hints.label(traced, style),
                "hits": traced.hits,
                "vars": [var_to_json(v) for v in traced.vars],
                "findings": [],
            }
        for current, finding in view.findings:
            entry = lines.setdefault(
                current, {"line": current, "label": "", "hits": 0, "vars": [], "findings": []}
            )
            entry["findings"].append(
                {
                    "kind": finding.kind,
                    "severity": finding.severity,
                    "message": finding_message(finding),
                }
            )
        exc = view.results.exception
        if exc is not None and view.exception_line is not None:
            entry = lines.setdefault(
                view.exception_line,
                {"line": view.exception_line, "label": "", "hits": 0, "vars": [], "findings": []},
            )
            severity, kind, message = run_ending(view.results.status, exc)
            entry["findings"].append({"kind": kind, "severity": severity, "message": message})
    return {"uri": document.uri, "version": document.version, "lines": list(lines.values())}
