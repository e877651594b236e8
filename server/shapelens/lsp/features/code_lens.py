"""``textDocument/codeLens``: "▶ Run with ShapeLens" above ``__main__`` blocks, top-level
functions and ``nn.Module.forward`` methods; after a run, what each ``nn.Module`` class of
the file did above its ``class`` line (``4.2k params · (4,64,64) → (4,64,65) ×22``). Parsing
only: nothing is executed."""

from __future__ import annotations

import ast
from collections.abc import Sequence

from lsprotocol import types

from shapelens.present.modules import merged_summary
from shapelens.trace.model import ModuleCall

TITLE = "▶ Run with ShapeLens"
SHOW_MODULES = "shapelens.modules.focus"
"""VS Code's command for the ShapeLens view (other editors may ignore the lens's command)."""


def _is_main_guard(node: ast.stmt) -> bool:
    if not isinstance(node, ast.If) or not isinstance(node.test, ast.Compare):
        return False
    parts = [node.test.left, *node.test.comparators]
    names = {p.id for p in parts if isinstance(p, ast.Name)}
    strings = {p.value for p in parts if isinstance(p, ast.Constant)}
    return names == {"__name__"} and strings == {"__main__"}


def _is_module_class(node: ast.ClassDef) -> bool:
    for base in node.bases:
        name = base.attr if isinstance(base, ast.Attribute) else getattr(base, "id", "")
        if name == "Module":
            return True
    return False


def lenses_for(
    source: str, uri: str, path: str | None = None, modules: Sequence[ModuleCall] = ()
) -> list[types.CodeLens]:
    """The lenses of the document at ``uri`` (file ``path``); ``modules``: the module tree
    of its last run."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    lenses = []

    def lens(line: int, command: str, argument: dict[str, str] | None, title: str = TITLE) -> None:
        position = types.Position(line - 1, 0)
        arguments = [argument] if argument is not None else None
        lenses.append(
            types.CodeLens(
                range=types.Range(position, position),
                command=types.Command(title=title, command=command, arguments=arguments),
            )
        )

    for node in tree.body:
        if _is_main_guard(node):
            lens(node.lineno, "shapelens.run", {"uri": uri})
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            lens(node.lineno, "shapelens.runFunction", {"uri": uri, "function": node.name})
        elif isinstance(node, ast.ClassDef) and _is_module_class(node):
            ran = _instances(node, path, modules)
            if ran:
                lens(node.lineno, SHOW_MODULES, None, merged_summary(ran))
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == "forward":
                    lens(
                        item.lineno,
                        "shapelens.runFunction",
                        {"uri": uri, "function": f"{node.name}.forward"},
                    )
    return lenses


def _instances(
    node: ast.ClassDef, path: str | None, modules: Sequence[ModuleCall]
) -> list[ModuleCall]:
    """The modules of the run whose ``forward`` is this class's (every instance)."""
    end = node.end_lineno or node.lineno
    return [
        m
        for m in modules
        if m.forward is not None
        and m.forward.file == path
        and node.lineno <= m.forward.line <= end
        and m.cls == node.name
    ]
