"""The source texts findings and listings quote: the same as the compiler's view of the file
(its line numbers, its byte columns), on files with a form feed, CRLF ends and non-ASCII
names, driven as a user runs them."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from shapelens.engine.source.segments import compiler_lines, segment

from conftest import need, run_cli

pytestmark = pytest.mark.backend

TRICKY = (
    "import numpy as np\r\n"
    "\x0c\r\n"  # a form feed: whitespace to the compiler, a line break to str.splitlines
    "def loss(p, t):\r\n"
    "    diff = t - p  # é\r\n"
    "    return diff\r\n"
    "\x0cé = np.ones((4, 1)); y = np.ones(4)\n"
    "bad = (y - é) ** 2\n"
    "total = loss(\n"
    "    é,\n"
    "    y)\n"
    "print('done', 'ü😀')"
)


def test_segments_are_what_the_ast_module_gives() -> None:
    lines = compiler_lines(TRICKY)
    assert "".join(lines) == TRICKY
    assert len(lines) == 11  # str.splitlines makes 13
    nodes = [node for node in ast.walk(ast.parse(TRICKY)) if hasattr(node, "lineno")]
    assert len(nodes) > 30
    for node in nodes:
        assert segment(lines, node) == ast.get_source_segment(TRICKY, node)


def test_a_failing_call_names_its_non_ascii_operands_as_written(tmp_path: Path) -> None:
    need("torch")
    main = tmp_path / "main.py"
    main.write_bytes(
        (
            "import torch\r\n"
            "\x0c\r\n"
            "def project(données, poids):\r\n"
            "    return torch.matmul(données,  # é\r\n"
            "                        poids)\r\n"
            "\x0c\n"
            "out = project(torch.randn(4, 3), torch.randn(5, 2))\n"
        ).encode()
    )
    run = run_cli("--quiet", "main.py", cwd=tmp_path)
    assert run.returncode == 1
    [failed] = run.findings("shape_mismatch")
    assert failed["line"] == 4
    assert failed["expression"] == "return torch.matmul(données, poids)"
    assert [(o["name"], o["shape"]) for o in failed["operands"]] == [
        ("données", [4, 3]),
        ("poids", [5, 2]),
    ]
