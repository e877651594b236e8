"""The package's shape: no import cycles, between modules or between packages.

Every import counts: at module level, inside functions, and under ``if TYPE_CHECKING:``
(a cycle that only the type checker sees is still two modules that need each other).
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

from shapelens.settings.groups import FindingsConfig

PACKAGE_ROOT = Path(__file__).resolve().parents[1] / "server" / "shapelens"


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE_ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in PACKAGE_ROOT.rglob("*.py")}


def _imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The shapelens modules that ``name`` imports, anywhere in its source."""
    is_package = path.name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        targets: Iterable[str] = ()
        if isinstance(node, ast.Import):
            targets = (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = name.split(".")
                anchor = anchor if is_package else anchor[:-1]
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, *([base] if base else [])])
            # `from pkg import mod` imports the module pkg.mod; `from mod import name` mod.
            targets = [
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base
                for alias in node.names
            ]
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def import_graph() -> dict[str, set[str]]:
    modules = _modules()
    known = set(modules)
    return {name: _imports(name, path, known) for name, path in modules.items()}


def _package_of(module: str) -> str:
    """``shapelens.lsp.features.hover`` → ``shapelens.lsp``: the top-level package."""
    return ".".join(module.split(".")[:2])


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of the graph, as the path that closes it, or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for target in sorted(graph.get(node, ())):
            if state.get(target) == 1:
                return [*path[path.index(target) :], target]
            if target not in state:
                found = visit(target)
                if found:
                    return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def test_no_cycle_between_modules() -> None:
    graph = import_graph()
    assert graph.get("shapelens.engine.backends.settrace")
    cycle = find_cycle(graph)
    assert cycle is None, " → ".join(cycle or ())


def test_no_cycle_between_packages() -> None:
    packages: dict[str, set[str]] = {}
    for module, targets in import_graph().items():
        # The root package only re-exports (`from shapelens import snoop`, __version__).
        if module == "shapelens":
            continue
        here = _package_of(module)
        packages.setdefault(here, set()).update(
            _package_of(t) for t in targets if t != "shapelens" and _package_of(t) != here
        )
    assert {"shapelens.engine", "shapelens.lsp", "shapelens.trace"} <= set(packages)
    cycle = find_cycle(packages)
    assert cycle is None, " → ".join(cycle or ())


def test_the_checker_sees_cycles() -> None:
    """The check itself: a function-local import that closes a loop is a cycle."""
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert find_cycle(graph) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_the_traced_child_loads_only_its_own_side() -> None:
    """Every run starts a child (cold) or forks one: what it imports before the user's code
    is start-up time. The parent's side (launcher, fork-server client, trace builder and
    codec, the settings' surfaces), the presentation and the language server stay out of it."""
    probe = (
        "import sys, shapelens.runner.child\n"
        "print('\\n'.join(m for m in sys.modules if m.startswith('shapelens')))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    loaded = set(done.stdout.split())
    assert "shapelens.engine.backends.settrace" in loaded
    parent_side = {
        "shapelens.runner.launcher",
        "shapelens.runner.warm",
        "shapelens.trace.builder",
        "shapelens.trace.codec",
        "shapelens.trace.model",
        # The settings schema's groups, not what derives the CLI, client and manifest from it.
        "shapelens.settings.cli",
        "shapelens.settings.client",
        "shapelens.settings.export",
        "shapelens.settings.arguments",
    }
    assert "shapelens.settings.groups" in loaded
    assert not loaded & parent_side
    assert not {m for m in loaded if m.startswith(("shapelens.present", "shapelens.lsp"))}


MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 80


def test_modules_and_functions_stay_small() -> None:
    """One responsibility per module and per function: none grows past these sizes (a module
    that does is split by what it holds, a function by the steps it takes)."""
    too_long: list[str] = []
    for name, path in sorted(_modules().items()):
        source = path.read_text(encoding="utf-8")
        if (lines := source.count("\n")) > MAX_MODULE_LINES:
            too_long.append(f"{name}: {lines} lines")
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    too_long.append(f"{name}.{node.name}: {length} lines")
    assert not too_long, "too long: " + "; ".join(too_long)


# -- One engine (issue 37): each check fails when the structure is undone -----------------

FINDING_RECORDS = {
    "Finding", "Operand", "Facts", "CauseStep", "ModuleFacts", "MemoryFacts", "RelatedLocation",
}  # fmt: skip


def _class_definitions() -> dict[str, list[str]]:
    """Class name → the modules that define a class of that name."""
    found: dict[str, list[str]] = {}
    for name, path in _modules().items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                found.setdefault(node.name, []).append(name)
    return found


def test_a_finding_is_defined_once() -> None:
    """The records of a finding live in one stdlib-only module that the child and the trace
    reader both import; a second definition would drift from it (one did: only the trace
    side had ``rank``, ``note`` and ``related``)."""
    definitions = _class_definitions()
    for record in sorted(FINDING_RECORDS):
        assert definitions.get(record) == ["shapelens.trace.finding"], record
    assert import_graph()["shapelens.trace.finding"] == set()  # the standard library only


def _callers(callee: str) -> set[str]:
    """The modules of the package, and of bench/, that call ``callee(...)`` by name."""
    found = set()
    bench = {f"bench.{p.stem}": p for p in PACKAGE_ROOT.parents[1].glob("bench/*.py")}
    for name, path in {**_modules(), **bench}.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            func = node.func if isinstance(node, ast.Call) else None
            if isinstance(func, ast.Name) and func.id == callee:
                found.add(name)
    return found


def test_the_engine_is_assembled_in_one_place() -> None:
    """The child, a notebook cell and snoop's recording all run the engine that
    ``engine/session.py`` builds: no module builds a recorder, a dispatcher or the rules by
    hand (a copy may miss a rule the child follows)."""
    for part in ("StatementRecorder", "Dispatcher", "rules_for", "build_backend"):
        assert _callers(part) == {"shapelens.engine.session"}, part
    graph = import_graph()
    users = ("shapelens.runner.child", "shapelens.notebook.session", "shapelens.snooping.recording")
    for user in users:
        assert "shapelens.engine.session" in graph[user], user


def test_the_recorder_imports_no_rule() -> None:
    """The recorder records and hands events on; the rules subscribe to what they need."""
    graph = import_graph()
    rules = {m for m in graph if m.startswith("shapelens.engine.findings.rules")}
    for module in graph:
        if module.startswith(("shapelens.engine.recording", "shapelens.engine.backends")):
            assert not graph[module] & rules, module


def test_every_kind_has_its_rule() -> None:
    """Every finding kind of the trace format is made by one registered rule of the engine,
    or by the merge of ranks: a kind without one is a kind nothing reports."""
    from shapelens.engine.findings.rules import RULES
    from shapelens.trace import merge
    from shapelens.trace.codec import SCHEMA_PATH
    from shapelens.trace.finding import KINDS

    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    in_schema = schema["$defs"]["finding"]["properties"]["kind"]["enum"]
    made = [kind for rule in RULES for kind in rule.kinds] + list(merge.KINDS)
    assert sorted(made) == sorted(set(made)), "a kind made by two rules"
    assert sorted(in_schema) == sorted(KINDS) == sorted(made)
    for rule in RULES:
        assert rule.events, rule.__name__
        assert rule.setting is None or hasattr(FindingsConfig(), rule.setting), rule.__name__


MAX_ENGINE_MODULES = 10


def test_folders_show_the_engine_s_parts() -> None:
    """At most a few modules directly in ``engine/``; the rest in folders named by role."""
    direct = sorted(p.name for p in (PACKAGE_ROOT / "engine").glob("*.py"))
    assert len(direct) <= MAX_ENGINE_MODULES, direct
    engine = PACKAGE_ROOT / "engine"
    folders = {p.name for p in engine.iterdir() if (p / "__init__.py").exists()}
    assert {"backends", "recording", "source", "modules", "torch_support", "memory"} <= folders
    assert (engine / "findings" / "rules" / "__init__.py").exists()
