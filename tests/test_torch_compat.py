"""Private torch names live in engine/torch_support/torch_compat.py only (torch 2.4 to 2.14
differ there).

An AST scan of every other module of the package: no import of a private torch module, no
``torch._x`` attribute, and no private name (``x._y``, or ``"_y"`` handed to ``getattr``
and friends) that is neither the package's own nor one of the standard library's or
pygls's listed below.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from conftest import run_cli

PACKAGE_ROOT = Path(__file__).resolve().parents[1] / "server" / "shapelens"
COMPAT = PACKAGE_ROOT / "engine" / "torch_support" / "torch_compat.py"
PRIVATE = re.compile(r"^_[A-Za-z0-9]\w*$")
NOT_TORCH = {
    "_getframe": "sys._getframe",
    "_current_frames": "sys._current_frames (a rank's main thread, read by its flusher)",
    "_exit": "os._exit",
    "_fields": "a namedtuple's fields",
    "_bootstrap": "importlib._bootstrap",
    "_stop_event": "pygls's server (lsp/tcp.py)",
    "_server": "pygls's server (lsp/tcp.py)",
    "_pydevd_bundle": "debugpy's pydevd (the debugger plugin)",
    "_original_tracing": "pydevd's sys.settrace (engine/backends/settrace.py)",
    "_frozen_importlib": "importlib._bootstrap as the interpreter holds it",
    "_ArgumentGroup": "argparse's argument group (settings/cli.py)",
}


def _sources() -> dict[Path, ast.Module]:
    return {p: ast.parse(p.read_text(encoding="utf-8")) for p in PACKAGE_ROOT.rglob("*.py")}


def _own_names(trees: dict[Path, ast.Module]) -> set[str]:
    """Every name the package itself defines (modules, functions, classes, attributes), less
    the private names torch_compat reaches into torch for: those count wherever they appear,
    even where the package happens to use the same name for something of its own."""
    names = {p.stem for p in PACKAGE_ROOT.rglob("*.py")}
    for path, tree in trees.items():
        if path == COMPAT:
            continue
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                names.add(node.attr)
            elif isinstance(node, ast.arg):
                names.add(node.arg)
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                names.add(node.target.id)
    return names - {name for _, name in _private_names(trees[COMPAT])}


def _private_names(tree: ast.Module) -> list[tuple[str, str]]:
    """(how it is shown, the name) for each private name ``tree`` uses: an imported private
    torch module, an attribute ``x._name`` (not of ``self`` or ``cls``), a string ``"_name"``."""
    found = []
    # the text pieces of an f-string (f"*{slot}_batch") are not names handed to anything
    pieces = {
        id(part)
        for node in ast.walk(tree)
        if isinstance(node, ast.JoinedStr)
        for part in node.values
        if isinstance(part, ast.Constant)
    }
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(a.name, a.name) for a in node.names if _private_torch_module(a.name)]
        elif isinstance(node, ast.ImportFrom) and _private_torch_module(node.module or ""):
            found.append((f"from {node.module} import", node.module or ""))
        elif isinstance(node, ast.Attribute) and PRIVATE.match(node.attr):
            root = node.value
            if not (isinstance(root, ast.Name) and root.id in ("self", "cls")):
                found.append((f"line {node.lineno}: .{node.attr}", node.attr))
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and id(node) not in pieces
        ):
            text = node.value
            if _private_torch_module(text) or PRIVATE.match(text):
                found.append((f"line {node.lineno}: {text!r}", text))
    return found


def _private_uses(tree: ast.Module, own: set[str]) -> list[str]:
    """The private names ``tree`` uses that are neither in ``own`` nor listed as not torch's."""
    return [
        shown
        for shown, name in _private_names(tree)
        if _private_torch_module(name) or (name not in own and name not in NOT_TORCH)
    ]


def _private_torch_module(name: str) -> bool:
    parts = name.split(".")
    return parts[0] == "torch" and any(PRIVATE.match(part) for part in parts[1:])


def test_only_torch_compat_names_private_torch_apis() -> None:
    trees = _sources()
    own = _own_names(trees)
    offenders = {
        str(path.relative_to(PACKAGE_ROOT)): uses
        for path, tree in trees.items()
        if path != COMPAT and (uses := _private_uses(tree, own))
    }
    assert not offenders, offenders


def test_the_scan_sees_each_kind_of_use() -> None:
    own = {"_mine"}
    source = (
        "import torch._dynamo\n"
        "from torch._subclasses.fake_tensor import FakeTensor\n"
        "torch._C._len_torch_function_stack()\n"
        "getattr(module, '_wrapped_call_impl')\n"
        "self._mine = other._mine\n"
        "sys._getframe(1)\n"
    )
    uses = _private_uses(ast.parse(source), own)
    assert sorted(uses) == sorted(
        [
            "torch._dynamo",
            "from torch._subclasses.fake_tensor import",
            "line 3: ._len_torch_function_stack",
            "line 3: ._C",
            "line 4: '_wrapped_call_impl'",
        ]
    ), uses


def test_a_device_error_in_words_no_torch_used_is_still_a_device_mismatch(
    tmp_path: Path,
) -> None:
    """Findings do not hang on one version's wording (torch 2.4's fake tensors said
    "Unhandled FakeTensor Device Propagation"): tensors on two devices explain the error."""
    main = tmp_path / "main.py"
    main.write_text(
        "import torch\n"
        "library = 'def combined(a, b):\\n    raise RuntimeError(\"a wording no torch used\")'\n"
        "exec(compile(library, '<a library>', 'exec'))  # raises outside the user's code\n"
        'a = torch.ones(2, 3, device="meta")\n'
        "b = torch.ones(2, 3)\n"
        "c = combined(a, b)\n"
    )
    run = run_cli("main.py", cwd=tmp_path)
    assert run.returncode == 1, run.stderr
    [finding] = run.findings("device_mismatch")
    assert finding["line"] == 6
    assert {o["name"] for o in finding["operands"]} == {"a", "b"}
