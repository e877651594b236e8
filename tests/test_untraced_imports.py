"""Library imports run untraced (under sys.settrace ``import torch`` would take twice as
long; under sys.monitoring each of its code starts and exceptions is a callback), while user
modules are traced as before and tracebacks show only the user's frames."""

from __future__ import annotations

import importlib
import os
import sys
import threading
from pathlib import Path

import pytest

from shapelens.engine.recording.scope import ScopeConfig
from shapelens.engine.session import engine_for

from conftest import line_of, need, run_cli

pytestmark = pytest.mark.backend

torch = need("torch")


def test_user_modules_are_traced_and_library_imports_are_not(script, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    helpers = script(
        """
        import torch
        SCALE = torch.ones(3)
        def double(x):
            y = x * 2
            return y
        """,
        name="pkg/helpers.py",
    )
    script("", name="pkg/__init__.py")
    main = script(
        """
        import json
        import torch
        from pkg import helpers
        from pkg.helpers import double
        out = double(helpers.SCALE)
        """
    )
    run = run_cli("--backend", "settrace", "main.py", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert run.var(helpers, line_of(helpers, "SCALE ="), "SCALE")["shape"] == [3]
    assert run.var(helpers, line_of(helpers, "y = x * 2"), "y")["shape"] == [3]
    assert run.var(main, line_of(main, "out ="), "out")["shape"] == [3]
    traced_files = {entry["file"] for entry in run.trace["lines"]}  # type: ignore[index]
    assert {os.path.realpath(helpers), os.path.realpath(main)} <= traced_files
    assert all(f.startswith(os.path.realpath(tmp_path)) for f in traced_files)  # no torch


def test_a_failing_import_shows_only_the_users_frames(script, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    main = script("import torch\nimport no_such_module_here\n")
    run = run_cli("--backend", "settrace", "main.py", cwd=tmp_path)
    assert run.returncode == 1
    assert run.trace is not None and run.trace["status"] == "exception"
    assert run.trace["exception"]["line"] == line_of(main, "import no_such_module_here")
    assert "ModuleNotFoundError: No module named 'no_such_module_here'" in run.stderr
    assert "shapelens" not in run.stderr.split("Traceback")[1].split("ModuleNotFoundError")[0]


def test_the_import_hook_is_restored_also_on_error(tmp_path: Path) -> None:
    bootstrap = sys.modules["_frozen_importlib"]  # importlib._bootstrap
    original = bootstrap._find_and_load
    built = engine_for(ScopeConfig(root=str(tmp_path)), backend="settrace")
    tracer, events = built.backend, built.recorder
    sys.modules.pop("colorsys", None)
    sys.modules.pop("json.tool", None)
    with pytest.raises(ZeroDivisionError), tracer:
        assert bootstrap._find_and_load is not original
        import colorsys  # noqa: F401  (a library import while tracing)

        importlib.import_module("json.tool")
        assert sys.gettrace() is not None  # resumed after each
        loaded = {sys.modules["colorsys"].__file__, sys.modules["json.tool"].__file__}
        assert not [c for c in events._seen_codes if c.co_filename in loaded]  # never traced
        _ = 1 / 0
    assert bootstrap._find_and_load is original
    assert sys.gettrace() is None and sys.getprofile() is None
    assert "json.tool" in sys.modules


@pytest.mark.skipif(sys.version_info < (3, 12), reason="sys.monitoring needs Python 3.12+")
def test_library_imports_start_no_callbacks_under_monitoring(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under sys.monitoring a library import's code starts and exceptions (60,000 of them
    for torch with torch._dynamo) reach none of our callbacks; user code is still followed."""
    current = threading.current_thread()  # a program of one thread (a test run may have more)
    monkeypatch.setattr(threading, "enumerate", lambda: [current])
    user = tmp_path / "helper_mod.py"
    user.write_text("def double(x):\n    y = x * 2\n    return y\n")
    sys.path.insert(0, str(tmp_path))
    built = engine_for(ScopeConfig(root=str(tmp_path)), backend="monitoring")
    tracer, events = built.backend, built.recorder
    for name in ("colorsys", "json.tool", "helper_mod"):
        sys.modules.pop(name, None)
    try:
        with pytest.raises(ZeroDivisionError), tracer:
            tool = tracer._tool
            wanted = sys.monitoring.get_events(tool)
            import colorsys  # noqa: F401  (a library import while tracing)

            importlib.import_module("json.tool")
            assert sys.monitoring.get_events(tool) == wanted  # resumed after each
            import helper_mod  # a user module: followed

            helper_mod.double(3)
            loaded = {sys.modules["colorsys"].__file__, sys.modules["json.tool"].__file__}
            assert not [c for c in events._seen_codes if c.co_filename in loaded]
            assert [c.co_name for c in events._seen_codes if c.co_filename == str(user)] == [
                "<module>",
                "double",
            ]
            _ = 1 / 0
        assert sys.monitoring.get_tool(tool) is None
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("helper_mod", None)


@pytest.mark.skipif(sys.version_info < (3, 12), reason="sys.monitoring needs Python 3.12+")
def test_user_code_another_thread_starts_during_a_library_import_is_followed(
    script, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    """sys.monitoring's events are global: a library import on one thread must not hide a
    function another thread starts meanwhile (a logger's thread importing lazily while the
    main thread enters ``train()``)."""
    library = tmp_path.parent / f"{tmp_path.name}-site"
    library.mkdir()
    (library / "slow_library.py").write_text(
        "import sys, time\nstarted = sys.modules['__main__'].started\n"
        "started.set()\ntime.sleep(0.5)  # the main thread starts train() meanwhile\n"
    )
    main = script(
        f"""
        import sys, threading
        sys.path.insert(0, {str(library)!r})
        started = threading.Event()

        def train():
            total = 0
            for step in range(3):
                total += step
            return total

        def load():
            import slow_library

        loader = threading.Thread(target=load)
        loader.start()
        started.wait()
        result = train()
        loader.join()
        """
    )
    run = run_cli("--backend", "monitoring", "main.py", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert run.var(main, line_of(main, "total += step"), "total")["hits"] == 3
