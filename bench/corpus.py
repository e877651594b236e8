"""Precision and recall of ShapeLens's findings on the corpus (`tests/corpus/`).

Every clean and buggy program is run under `shapelens run`; a finding (warning or error)
of a scored kind at a `# expect: KIND` line is a true positive, any other one a false
alarm, an expectation without its finding a miss. `info` findings are not alarms.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "corpus"))
from check import SCORED_KINDS, evaluate, score
from report import emit


def _ratio(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="append the table to this markdown file")
    parser.add_argument("--jobs", type=int, default=2)
    options = parser.parse_args()
    results = evaluate(jobs=options.jobs)
    clean = [r for r in results if r.program.category == "clean"]
    buggy = [r for r in results if r.program.category == "buggy"]
    lines = [
        "",
        f"## Findings on the corpus ({len(clean)} clean programs, {len(buggy)} with a planted bug)",
        "",
        "| kind | found | false alarms | missed | precision | recall |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for kind in (*SCORED_KINDS, None):
        s = score(results, kind)
        lines.append(
            f"| {kind or '**all**'} | {s.true_positives} | {s.false_positives} | "
            f"{s.false_negatives} | {_ratio(s.precision)} | {_ratio(s.recall)} |"
        )
    alarms = sum(len(r.false_positives) for r in clean)
    lines.append("")
    lines.append(f"False alarms on clean programs: {alarms}.")
    for result in results:
        for finding in result.false_positives:
            lines.append(f"- false alarm in {result.name}: {finding.kind} at line {finding.line}")
        for missed in result.false_negatives:
            lines.append(f"- missed in {result.name}: {missed.kind} at line {missed.line}")
    emit(lines, options.out)


if __name__ == "__main__":
    main()
