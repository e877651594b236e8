"""``shapelens run`` behaves like ``python``: argv, __main__, cwd, stdin, output, exit status."""

from __future__ import annotations

import json
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from conftest import CHILD_PYTHON, line_of, run_cli


def test_runs_the_script_as_python_would(script, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    main = script(
        """
        import json, os, sys
        import numpy as np
        line = sys.stdin.readline().strip()
        arr = np.zeros((2, 3))
        print(json.dumps({"argv": sys.argv, "name": __name__, "cwd": os.getcwd(),
                          "stdin": line, "path0": sys.path[0], "file": __file__}))
        print("to stderr", file=sys.stderr)
        sys.exit(int(sys.argv[2]))
        """
    )
    run = run_cli("main.py", "--lr", "7", cwd=tmp_path, stdin="hello\n")
    seen = json.loads(run.stdout)
    assert seen["argv"] == [str(main), "--lr", "7"]
    assert seen["name"] == "__main__"
    assert seen["cwd"] == str(tmp_path)
    assert seen["stdin"] == "hello"
    assert seen["path0"] == str(tmp_path)
    assert seen["file"] == str(main)
    assert "to stderr" in run.stderr
    assert run.returncode == 7
    assert run.trace is not None
    assert (run.trace["status"], run.trace["exit_code"]) == ("exit", 7)
    assert run.trace["argv"] == [str(main), "--lr", "7"]
    assert run.var(main, line_of(main, "arr ="), "arr")["shape"] == [2, 3]


@pytest.mark.parametrize("cold", [True, False], ids=["cold", "forked"])
def test_the_programs_collector_tracks_no_more_objects_than_under_python(  # type: ignore[no-untyped-def]
    script, tmp_path: Path, cold: bool
) -> None:
    """The runner's own objects (~19,000: the engine's modules) are not the program's: its
    full collections must not scan them, nor count them towards the next one (one more full
    collection cost a char-level GPT's first optimizer step 0.13 s)."""
    script(
        """
        import gc
        print(len(gc.get_objects()))
        """
    )
    python = CHILD_PYTHON or sys.executable
    plain = subprocess.run([python, "main.py"], cwd=tmp_path, capture_output=True, text=True)
    run = run_cli("--quiet", "main.py", cwd=tmp_path, cold=cold)
    assert run.returncode == 0, run.stderr
    assert int(run.stdout) <= int(plain.stdout), (run.stdout, plain.stdout)


def test_module_mode(script, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    script("", "pkg/__init__.py")
    module = script(
        """
        import sys
        import numpy as np
        grid = np.ones((4, 5), dtype=np.float32)
        print(__name__, sys.argv[1:])
        """,
        "pkg/tool.py",
    )
    run = run_cli("-m", "pkg.tool", "a", "--b", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "__main__ ['a', '--b']"
    grid = run.var(module, line_of(module, "grid ="), "grid")
    assert (grid["shape"], grid["dtype"], grid["type"]) == ([4, 5], "float32", "numpy.ndarray")


def test_listing_quiet_and_colour(script, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    script(
        """
        import numpy as np
        a = np.zeros(3)
        """
    )
    loud = run_cli("main.py", cwd=tmp_path)
    assert "a = np.zeros(3)" in loud.stderr and "a (3,)" in loud.stderr
    assert "\x1b[" not in loud.stderr  # not a terminal: no colour
    coloured = run_cli("--color", "main.py", cwd=tmp_path)
    assert "\x1b[" in coloured.stderr
    quiet = run_cli("--quiet", "main.py", cwd=tmp_path)
    assert quiet.stderr == "" and quiet.returncode == 0


def test_function_filter(script, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    main = script(
        """
        import numpy as np

        class Block:
            def forward(self, x):
                h = x * 2
                return h

        def other(x):
            o = x + 1
            return o

        top = np.zeros((2, 2))
        Block().forward(top)
        other(top)
        """
    )
    run = run_cli("--function", "Block.forward", "main.py", cwd=tmp_path)
    files = {entry["line"] for entry in run.trace["lines"]}  # type: ignore[index]
    assert line_of(main, "h = x * 2") in files
    assert line_of(main, "o = x + 1") not in files
    assert line_of(main, "top =") not in files
    run = run_cli("--function", "other", "--function", "forward", "main.py", cwd=tmp_path)
    files = {entry["line"] for entry in run.trace["lines"]}  # type: ignore[index]
    assert {line_of(main, "h = x * 2"), line_of(main, "o = x + 1")} <= files


def test_include_and_exclude(script, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    helper = script(
        """
        import numpy as np
        def make():
            made = np.zeros(4)
            return made
        """,
        "lib/helper.py",
    )
    gen = script(
        """
        import numpy as np
        def gen():
            g = np.ones(2)
            return g
        """,
        "generated/gen.py",
    )
    main = script(
        """
        import sys
        sys.path[:0] = ["lib", "generated"]
        import helper, gen
        a = helper.make()
        b = gen.gen()
        """
    )
    run = run_cli("--exclude", "generated/*", "main.py", cwd=tmp_path)
    assert run.line(helper, line_of(helper, "made =")) is not None
    assert run.line(gen, line_of(gen, "g =")) is None
    assert run.var(main, line_of(main, "a ="), "a")["shape"] == [4]


def test_outside_root_is_not_user_code_unless_included(script, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    outside = tmp_path / "outside"
    project = tmp_path / "project"
    (outside).mkdir()
    (project).mkdir()
    (outside / "extlib.py").write_text(
        "import numpy as np\ndef f():\n    e = np.zeros(1)\n    return e\n"
    )
    (project / "main.py").write_text(
        f"import sys\nsys.path.insert(0, {str(outside)!r})\nimport extlib\nr = extlib.f()\n"
    )
    run = run_cli("main.py", cwd=project)
    assert run.line(outside / "extlib.py", 3) is None
    run = run_cli("--include", str(outside / "*.py"), "main.py", cwd=project)
    assert run.var(outside / "extlib.py", 3, "e")["shape"] == [1]


def test_bad_input_gives_one_clear_line(script, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    missing = run_cli("nope.py", cwd=tmp_path)
    assert missing.returncode == 2
    assert missing.stderr.strip() == "shapelens: cannot run nope.py: no such file"

    script("x = (1,\n", "broken.py")
    broken = run_cli("broken.py", cwd=tmp_path)
    assert broken.returncode == 2
    assert broken.stderr.startswith("shapelens: syntax error in broken.py:1")
    assert "Traceback" not in broken.stderr

    (tmp_path / "latin1.py").write_bytes(b"name = '\xe9t\xe9'\n")
    latin = run_cli("latin1.py", cwd=tmp_path)
    assert latin.returncode == 2
    assert "not valid UTF-8" in latin.stderr and "Traceback" not in latin.stderr

    unknown = run_cli("--frobnicate", "main.py", cwd=tmp_path)
    assert unknown.returncode == 2
    assert "unrecognized arguments: --frobnicate" in unknown.stderr
    assert "Traceback" not in unknown.stderr

    no_script = run_cli(cwd=tmp_path)
    assert no_script.returncode == 2 and "missing SCRIPT" in no_script.stderr

    bad_timeout = run_cli("--timeout", "soon", "main.py", cwd=tmp_path)
    assert bad_timeout.returncode == 2 and "not a number" in bad_timeout.stderr

    directory = run_cli(".", cwd=tmp_path)
    assert directory.returncode == 2 and "directory" in directory.stderr

    bad_python = run_cli("--python", "/no/such/python", "latin1.py", cwd=tmp_path)
    assert bad_python.returncode == 2
    assert "interpreter not found" in bad_python.stderr


def test_other_interpreter_via_python_option(script, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # A fresh virtual environment: another interpreter, with no numpy (ours has it).
    other = tmp_path / "other-env"
    venv.create(other, symlinks=True)
    python = other / "bin" / "python"
    script(
        """
        import importlib.util, json, sys
        print(json.dumps({"executable": sys.executable, "prefix": sys.prefix,
                          "numpy": importlib.util.find_spec("numpy") is not None}))
        """
    )
    run = run_cli("--python", str(python), "main.py", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    seen = json.loads(run.stdout)
    assert seen == {"executable": str(python), "prefix": str(other), "numpy": False}
    assert run.trace is not None and run.trace["status"] == "ok"
