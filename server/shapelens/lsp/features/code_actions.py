"""``textDocument/codeAction``: contracts written from the run. "Add shape comment" on a
line that bound a tensor; "Annotate with jaxtyping" on the ``def`` line of a traced
function. The text comes from ``present/annotations.py`` and
``present/signatures.py``; here it becomes LSP edits."""

from __future__ import annotations

from collections.abc import Sequence

from lsprotocol import types
from pygls.workspace import TextDocument
from pygls.workspace.position_codec import ServerTextPosition

from shapelens.lsp.results import FileView
from shapelens.present.annotations import TextChange, shape_comment_edits
from shapelens.present.signatures import jaxtyping_changes

KIND = types.CodeActionKind.RefactorRewrite
"""Both rewrite the source without changing what it does (VS Code lists them under Ctrl+.)."""


def code_actions_for(
    view: FileView,
    document: TextDocument,
    selection: types.Range,
    only: Sequence[str] | None = None,
) -> list[types.CodeAction]:
    """The actions for the line the selection starts on: nothing where nothing ran."""
    if only is not None and not any(kind == KIND or KIND.startswith(kind + ".") for kind in only):
        return []
    lines = document.lines
    line = selection.start.line
    if not 0 <= line < len(lines):
        return []
    source = document.source
    actions: list[types.CodeAction] = []
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


def _action(
    title: str, document: TextDocument, lines: Sequence[str], changes: Sequence[TextChange]
) -> types.CodeAction:
    edits = [types.TextEdit(range=_range(document, lines, c), new_text=c.text) for c in changes]
    return types.CodeAction(
        title=title,
        kind=KIND,
        edit=types.WorkspaceEdit(changes={document.uri: edits}),
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
