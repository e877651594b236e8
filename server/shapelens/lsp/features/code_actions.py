"""``textDocument/codeAction``: contracts written from the run. "Add shape comment" on a
line that bound a tensor; "Annotate with jaxtyping" on the ``def`` line of a traced
function; "Update shape comment" (a quick fix) on a ``shape_comment`` finding. The text
comes from ``present/annotations.py`` and ``present/signatures.py``; here it becomes LSP
edits."""

from __future__ import annotations

from collections.abc import Sequence

from lsprotocol import types
from pygls.workspace import TextDocument
from pygls.workspace.position_codec import ServerTextPosition

from shapelens.lsp.results import FileView
from shapelens.present.annotations import TextChange, comment_update, shape_comment_edits
from shapelens.present.signatures import jaxtyping_changes

KIND = types.CodeActionKind.RefactorRewrite
"""Both rewrite the source without changing what it does (VS Code lists them under Ctrl+.)."""
FIX = types.CodeActionKind.QuickFix
"""A stale shape comment is a finding: its update is that finding's fix."""


def code_actions_for(
    view: FileView,
    document: TextDocument,
    selection: types.Range,
    only: Sequence[str] | None = None,
) -> list[types.CodeAction]:
    """The actions for the line the selection starts on: nothing where nothing ran."""
    lines = document.lines
    line = selection.start.line
    if not 0 <= line < len(lines):
        return []
    actions = _comment_fixes(view, document, line) if _wanted(FIX, only) else []
    if not _wanted(KIND, only):
        return actions
    source = document.source
    traced = view.lines.get(line)
    if traced is not None:
        for edit in shape_comment_edits(source, line, traced):
            actions.append(
                _action(f"Add shape comment: {edit.comment}", document, lines, [edit.change])
            )
    # requests come on every cursor move: the source is parsed only on a def's lines
    header = lines[line].lstrip().startswith(("def ", "async def ", "@"))
    changes = jaxtyping_changes(source, line, view.lines) if header and view.lines else None
    if changes is not None:
        actions.append(_action("Annotate with jaxtyping", document, lines, changes))
    return actions


def _wanted(kind: str, only: Sequence[str] | None) -> bool:
    return only is None or any(kind == asked or kind.startswith(asked + ".") for asked in only)


def _comment_fixes(view: FileView, document: TextDocument, line: int) -> list[types.CodeAction]:
    """ "Update shape comment" for each stale shape comment on ``line``."""
    lines = document.lines
    actions = []
    for current, finding in view.findings:
        if current != line or finding.kind != "shape_comment":
            continue
        if finding.expected is None or finding.rewrite is None:
            continue
        change = comment_update(lines[line], line, finding.expected, finding.rewrite)
        if change is not None:
            title = f"Update shape comment: {finding.rewrite}"
            actions.append(_action(title, document, lines, [change], kind=FIX, preferred=True))
    return actions


def _action(
    title: str,
    document: TextDocument,
    lines: Sequence[str],
    changes: Sequence[TextChange],
    *,
    kind: str = KIND,
    preferred: bool | None = None,
) -> types.CodeAction:
    edits = [types.TextEdit(range=_range(document, lines, c), new_text=c.text) for c in changes]
    return types.CodeAction(
        title=title,
        kind=kind,
        edit=types.WorkspaceEdit(changes={document.uri: edits}),
        is_preferred=preferred,
    )


def _range(document: TextDocument, lines: Sequence[str], change: TextChange) -> types.Range:
    """Character columns in client units (UTF-16 for VS Code)."""
    codec = document.position_codec
    return types.Range(
        codec.position_to_client_units(lines, ServerTextPosition(change.line, change.column)),
        codec.position_to_client_units(
            lines, ServerTextPosition(change.end_line, change.end_column)
        ),
    )
