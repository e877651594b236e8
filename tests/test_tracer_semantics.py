"""Where values are reported: loops, recursion, generators, comprehensions, nested functions,
methods, other user files, containers, return values (numpy: runs on every interpreter)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from conftest import line_of, run_cli

pytestmark = pytest.mark.backend

SAMPLES = Path(__file__).with_name("samples")


def test_control_flow_and_scopes(tmp_path: Path) -> None:
    main = tmp_path / "main.py"  # the golden sample both backends are compared on
    shutil.copy(SAMPLES / "control_flow.py", main)
    run = run_cli("--quiet", "main.py", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    seq = run.var(main, line_of(main, "seq ="), "seq")
    assert seq["hits"] == 4 and seq["shapes"] == [[2, 3], [3, 3], [4, 3], [5, 3]]
    assert seq["shape"] == [5, 3]
    # arguments on the def line, the return value on the returning line
    assert run.var(main, line_of(main, "return seq"), "<return>")["hits"] == 4
    assert run.line(main, line_of(main, "def grow"))["hits"] == 4
    assert run.var(main, line_of(main, "out = grow(n)"), "out")["hits"] == 4
    # recursion: every level recorded on its lines
    assert run.var(main, line_of(main, "deeper = fact"), "deeper")["hits"] == 3
    assert run.var(main, line_of(main, "base ="), "base")["hits"] == 1
    # generators: each resumption continues the frame; yields are reported
    item = run.var(main, line_of(main, "item ="), "item")
    assert item["hits"] == 3 and item["shapes"] == [[1], [2], [3]]
    assert run.var(main, line_of(main, "yield item"), "<yield>")["hits"] == 3
    # comprehensions: the result on the line, containers flattened
    items = run.line(main, line_of(main, "items ="))
    assert {v["name"] for v in items["vars"]} == {"items[0]", "items[1]", "items[2]"}
    assert run.var(main, line_of(main, "squares ="), "squares[3]")["shape"] == [3]
    # closures and nested functions
    assert run.var(main, line_of(main, "scaled ="), "scaled")["shape"] == [2, 2]
    assert run.var(main, line_of(main, "def inner"), "v")["shape"] == [2, 2]
    assert run.var(main, line_of(main, "nest ="), "nest")["shape"] == [2, 2]
    assert run.var(main, line_of(main, "product ="), "product")["shape"] == [2, 2]  # a method
    # a multi-line statement is reported once, on its first line
    multi = run.var(main, line_of(main, "multi ="), "multi")
    assert multi["hits"] == 1 and multi["shape"] == [5]


def test_containers_and_other_files(script, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    helper = script(
        """
        import numpy as np
        from collections import namedtuple
        Pair = namedtuple("Pair", "left right")
        def load():
            batch = {"image": np.zeros((2, 3, 4)), "label": np.zeros(2, dtype=np.int64), "id": 7}
            return batch
        def split(a):
            pair = Pair(a[:1], a[1:])
            return pair
        """,
        "data.py",
    )
    main = script(
        """
        import numpy as np
        from data import load, split
        batch = load()
        pair = split(np.arange(5.0))
        both = (np.zeros(1), [np.ones((1, 1))])
        """
    )
    run = run_cli("--quiet", "main.py", cwd=tmp_path)
    image = run.var(helper, line_of(helper, "batch ="), "batch['image']")
    assert (image["shape"], image["dtype"]) == ([2, 3, 4], "float64")
    assert run.var(helper, line_of(helper, "batch ="), "batch['label']")["dtype"] == "int64"
    assert run.var(main, line_of(main, "pair ="), "pair.right")["shape"] == [4]
    assert run.var(main, line_of(main, "both ="), "both[1][0]")["shape"] == [1, 1]
    names = {v["name"] for v in run.line(main, line_of(main, "batch ="))["vars"]}
    assert names == {"batch['image']", "batch['label']"}


def test_trace_stays_flat_over_many_iterations(script, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    main = script(
        """
        import numpy as np
        acc = np.zeros(4)
        for step in range(100_000):
            delta = np.ones(4)
            acc = acc + delta
        """
    )
    run = run_cli("--quiet", "main.py", cwd=tmp_path, timeout=300)
    assert run.trace is not None
    entries = [(e["line"], v["name"]) for e in run.trace["lines"] for v in e["vars"]]
    assert len(entries) == len(set(entries)) == 4  # one per (line, variable), not per iteration
    step = run.var(main, line_of(main, "for step in"), "step")
    assert step["number"][1:] == [0, 99_999]  # the counter's range, in constant space
    assert run.var(main, line_of(main, "acc = acc + delta"), "acc")["hits"] == 100_000
    assert run.line(main, line_of(main, "delta ="))["hits"] == 100_000
    assert len((tmp_path / ".trace.json").read_bytes()) < 4096
