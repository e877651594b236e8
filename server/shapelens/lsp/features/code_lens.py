"""``textDocument/codeLens``: "▶ Run with ShapeLens" above ``__main__`` blocks, top-level
functions and ``nn.Module.forward`` methods. Parsing only: nothing is executed."""

from __future__ import annotations

import ast

from lsprotocol import types

TITLE = "▶ Run with ShapeLens"


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


def lenses_for(source: str, uri: str) -> list[types.CodeLens]:
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    lenses = []

    def lens(line: int, command: str, argument: dict[str, str], title: str = TITLE) -> None:
        position = types.Position(line - 1, 0)
        lenses.append(
            types.CodeLens(
                range=types.Range(position, position),
                command=types.Command(title=title, command=command, arguments=[argument]),
            )
        )

    for node in tree.body:
        if _is_main_guard(node):
            lens(node.lineno, "shapelens.run", {"uri": uri})
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            lens(node.lineno, "shapelens.runFunction", {"uri": uri, "function": node.name})
        elif isinstance(node, ast.ClassDef) and _is_module_class(node):
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == "forward":
                    lens(
                        item.lineno,
                        "shapelens.runFunction",
                        {"uri": uri, "function": f"{node.name}.forward"},
                    )
    return lenses
