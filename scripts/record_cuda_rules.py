"""Record real CUDA's ground truth for tests/data/cuda_device_rules.py, on a machine with a GPU.

    python scripts/record_cuda_rules.py [OUT.json]

Runs every rule of the table on the real GPU (each in a fresh namespace after the table's
PRELUDE), writes what it raised (class and the message's first line; null where it ran) with
the table's expectation next to it as JSON (default: cuda_rules_observed.json), prints the
rules where the GPU disagrees with the table, and exits 1 if any does. Standard library and
torch only; nothing of ShapeLens is imported.
"""

from __future__ import annotations

import json
import runpy
import sys
from pathlib import Path

import torch

TABLE = Path(__file__).resolve().parents[1] / "tests" / "data" / "cuda_device_rules.py"


def observe(prelude: str, code: str) -> list[str] | None:
    """[class, first line] of what the rule raised on the GPU, or None."""
    try:
        exec(compile(prelude + code, "<rule>", "exec"), {"__name__": "__rule__"})
        torch.cuda.synchronize()  # a kernel's asynchronous error belongs to this rule
    except Exception as err:
        return [type(err).__name__, (str(err).splitlines() or [""])[0]]
    return None


def main() -> int:
    if not torch.cuda.is_available():
        print("record_cuda_rules: no CUDA device here; run it on a machine with a GPU")
        return 2
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "cuda_rules_observed.json")
    table = runpy.run_path(str(TABLE))
    rows, disagree = [], []
    for rule in table["RULES"]:
        raised = observe(table["PRELUDE"], rule["code"])
        expected = rule["raises"]
        agrees = (
            (raised is None)
            if expected is None
            else (raised is not None and raised[0] == expected and rule["says"] in raised[1])
        )
        rows.append(
            {
                "name": rule["name"],
                "expected": expected,
                "says": rule.get("says"),
                "raised": raised,
                "agrees": agrees,
            }
        )
        if not agrees:
            disagree.append(rows[-1])
    report = {
        "torch": torch.__version__,
        "device": torch.cuda.get_device_name(0),
        "rules": len(rows),
        "agree": len(rows) - len(disagree),
        "observed": rows,
    }
    out.write_text(json.dumps(report, indent=1) + "\n")
    print(
        f"{report['agree']} of {len(rows)} rules as the table says ({report['device']}, "
        f"torch {torch.__version__}); written to {out}"
    )
    for row in disagree:
        print(f"  {row['name']}: table {row['expected']} ({row['says']}), GPU {row['raised']}")
    return 1 if disagree else 0


if __name__ == "__main__":
    sys.exit(main())
