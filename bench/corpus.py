"""Precision and recall of ShapeLens's findings on the corpus (`tests/corpus/`).

Every clean and buggy program is run under `shapelens run`; a finding (warning or error)
of a scored kind at a `# expect: KIND` line is a true positive, any other one a false
alarm, an expectation without its finding a miss; a `# cause: KIND` line is found when a
finding of KIND names it (tests/corpus/scoring.py). Crash-line, cause-line and silent
findings are scored apart. `info` findings are not alarms.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "corpus"))
from check import SCORE_CATEGORIES, SCORED_KINDS, evaluate, score
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
        "| findings | found | false alarms | missed | precision | recall |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    rows = [(f"**{c}**", score(results, category=c)) for c in SCORE_CATEGORIES]
    rows += [(kind, score(results, kind)) for kind in SCORED_KINDS]
    rows.append(("**all**", score(results)))
    for name, s in rows:
        lines.append(
            f"| {name} | {s.true_positives} | {s.false_positives} | "
            f"{s.false_negatives} | {_ratio(s.precision)} | {_ratio(s.recall)} |"
        )
    alarms = sum(len(r.false_positives) for r in clean)
    lines.append("")
    lines.append(f"False alarms on clean programs: {alarms}.")
    for result in results:
        for finding in result.false_positives:
            lines.append(f"- false alarm in {result.name}: {finding.kind} at line {finding.line}")
        for missed in result.false_negatives:
            lines.append(
                f"- missed in {result.name}: {missed.kind} at {missed.file.name}:{missed.line}"
                + (" (cause)" if missed.marker == "cause" else "")
            )
        for finding in result.wrong_causes:
            lines.append(
                f"- wrong cause in {result.name}: the {finding.kind} at line {finding.line} "
                "names no `# cause:` line"
            )
    emit(lines, options.out)


if __name__ == "__main__":
    main()
