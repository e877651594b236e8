"""The findings corpus: zero false alarms on the clean programs, every planted bug found at
its line with the right kind (tests/corpus/README.md; `make bench` prints the scores)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import need, warm_runner

need("torch")

CORPUS = Path(__file__).resolve().parent / "corpus"
sys.path.insert(0, str(CORPUS))
import check  # noqa: E402

PROGRAMS = check.discover(CORPUS)


@pytest.fixture(scope="module")
def results() -> dict[str, Any]:
    """All programs, two at a time (the machine has two cores), forked from a warm runner
    (``python tests/corpus/check.py`` and `make bench` run each with ``shapelens run``)."""
    with warm_runner(check.child_env()) as warm:
        return {r.name: r for r in check.evaluate(CORPUS, jobs=2, warm=warm)}


def test_the_corpus_is_big_enough() -> None:
    clean = [p for p in PROGRAMS if p.category == "clean"]
    buggy = [p for p in PROGRAMS if p.category == "buggy"]
    assert len(clean) + len(buggy) >= 25 and len(clean) >= 10 and len(buggy) >= 10


@pytest.mark.parametrize("name", [p.name for p in PROGRAMS])
def test_program(name: str, results: dict[str, Any]) -> None:
    result = results[name]
    assert not result.problems, result.problems
    alarms = [f"{f.kind} at {f.file.name}:{f.line}: {f.message}" for f in result.false_positives]
    assert not alarms, alarms
    missed = [f"{e.kind} at {e.file.name}:{e.line}" for e in result.false_negatives]
    assert not missed, missed
