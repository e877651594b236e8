"""How the corpus scores findings against its markers (tests/corpus/scoring.py): a
`# cause:` line met through a chain step, an operand's birth or module declaration, or a
finding at that line; a chain that names a wrong line; the three categories apart. Findings
come in as a trace's JSON, as check.py reads them from `shapelens run --json`."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

CORPUS = Path(__file__).resolve().parent / "corpus"
sys.path.insert(0, str(CORPUS))
import check  # noqa: E402


def _program(tmp_path: Path, files: dict[str, str]) -> check.Program:
    for name, text in files.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    paths = tuple(sorted(tmp_path / name for name in files))
    return check.Program("buggy/case", "buggy", tmp_path / "main.py", paths)


MAIN = """import torch
from model import Net
x = torch.ones(1, 4).squeeze()  # cause: shape_mismatch
y = Net()(x)
z = torch.cat([y, x], dim=1)  # expect: shape_mismatch
"""
MODEL = """import torch.nn as nn
class Net(nn.Sequential):
    def __init__(self):
        super().__init__(
            nn.Linear(4, 4),  # cause: shape_mismatch
        )
"""


def _result(tmp_path: Path, raw_findings: list[dict[str, Any]]) -> check.ProgramResult:
    program = _program(tmp_path, {"main.py": MAIN, "model.py": MODEL})
    result = check.ProgramResult(program, check.expectations(program))
    result.findings = check._read_findings({"findings": raw_findings})
    verdict = check.score_findings(result.expected, result.findings, check.NOT_ALARMS)
    result.true_positives, result.false_positives = verdict.true_positives, verdict.false_positives
    result.false_negatives, result.causes_met = verdict.false_negatives, verdict.causes_met
    result.wrong_causes = verdict.wrong_causes
    return result


def _finding(tmp_path: Path, kind: str, line: int, **extra: Any) -> dict[str, Any]:
    return {
        "kind": kind,
        "severity": "error",
        "file": str(tmp_path / "main.py"),
        "line": line,
        **extra,
    }


def test_markers_are_read_with_their_category(tmp_path: Path) -> None:
    program = _program(tmp_path, {"main.py": MAIN + "w = x + 1  # expect: broadcast, op_error\n"})
    found = {(e.marker, e.kind, e.line, e.category) for e in check.expectations(program)}
    assert found == {
        ("cause", "shape_mismatch", 3, "cause-line"),
        ("expect", "shape_mismatch", 5, "crash-line"),
        ("expect", "broadcast", 6, "silent"),
        ("expect", "op_error", 6, "crash-line"),
    }


def test_a_cause_is_met_by_a_chain_step_an_operand_birth_or_a_module_declaration(
    tmp_path: Path,
) -> None:
    model = str(tmp_path / "model.py")
    crash = _finding(
        tmp_path,
        "shape_mismatch",
        5,
        chain=[{"file": str(tmp_path / "main.py"), "line": 3, "expression": "x.squeeze()"}],
        operands=[
            {"name": "y", "line": 4, "module": None},
            {"name": "net", "line": 4, "module": {"class": "Linear", "file": model, "line": 5}},
        ],
    )
    result = _result(tmp_path, [crash])
    assert {(e.file.name, e.line) for e in result.causes_met} == {("main.py", 3), ("model.py", 5)}
    assert not result.false_negatives and not result.false_positives and not result.wrong_causes
    assert check.score([result], category="cause-line") == check.Score(2, 0, 0)
    assert check.score([result], category="crash-line") == check.Score(1, 0, 0)

    # the operand's birth, its `file` absent: the finding's own file
    born = _finding(tmp_path, "shape_mismatch", 5, operands=[{"name": "x", "line": 3}])
    result = _result(tmp_path, [born])
    assert [(e.file.name, e.line) for e in result.causes_met] == [("main.py", 3)]


def test_a_finding_at_the_cause_line_meets_it_and_is_no_false_alarm(tmp_path: Path) -> None:
    result = _result(
        tmp_path,
        [_finding(tmp_path, "shape_mismatch", 5), _finding(tmp_path, "shape_mismatch", 3)],
    )
    assert [e.line for e in result.causes_met] == [3]
    assert not result.false_positives
    # a finding of another kind there (the squeeze's degenerate_op warning) meets nothing,
    # but points at the cause: no false alarm either
    result = _result(
        tmp_path,
        [_finding(tmp_path, "shape_mismatch", 5), _finding(tmp_path, "degenerate_op", 3)],
    )
    assert not result.causes_met
    assert not result.false_positives
    assert check.score([result], category="silent") == check.Score(0, 0, 0)
    assert check.score([result], category="cause-line") == check.Score(0, 0, 2)
    assert check.score([result], category="crash-line") == check.Score(1, 0, 0)
    # elsewhere it is a false alarm of its category
    result = _result(
        tmp_path,
        [_finding(tmp_path, "shape_mismatch", 5), _finding(tmp_path, "degenerate_op", 4)],
    )
    assert [f.kind for f in result.false_positives] == ["degenerate_op"]
    assert check.score([result], category="silent") == check.Score(0, 1, 0)


def test_a_chain_that_names_no_cause_line_is_a_wrong_cause(tmp_path: Path) -> None:
    crash = _finding(
        tmp_path, "shape_mismatch", 5, chain=[{"file": str(tmp_path / "main.py"), "line": 4}]
    )
    result = _result(tmp_path, [crash])
    assert [f.line for f in result.wrong_causes] == [5]
    assert not result.ok
    assert check.score([result], category="cause-line") == check.Score(0, 1, 2)
    assert check.score([result]) == check.Score(1, 1, 2)
    assert "names no `# cause:` line" in check.report([result])
    scores = check.to_json([result])["scores"]
    assert scores["cause-line"]["false_positives"] == 1
    assert scores["crash-line"]["recall"] == 1.0
