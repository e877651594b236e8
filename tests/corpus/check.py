"""Score ShapeLens's findings against the corpus: ``python tests/corpus/check.py``.

Every program under ``clean/`` and ``buggy/`` (a ``NAME.py`` file, or a ``NAME/`` folder
run through its ``main.py``) is run from its own folder with ``python -m shapelens run
--json TRACE --quiet``. The trace's findings are compared with the ``# expect: KIND``
and ``# cause: KIND`` comments in all of the program's files (``scoring.py`` says how:
crash-line, cause-line and silent findings are scored apart).

A clean program must also run to the end under the tracer. The script prints a table per
program, every false positive and false negative with its message, precision and recall
per category, per kind and overall, and exits 1 when anything disagrees. ``evaluate()`` is the same
thing as a function, for a pytest test or a bench script.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Collection, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scoring import (
    SCORE_CATEGORIES,
    SCORED_KINDS,
    Expectation,
    Finding,
    Score,
    named_sites,
    read_markers,
    score_findings,
)

from shapelens.present.findings import finding_message
from shapelens.runner.contract import RunRequest
from shapelens.runner.launcher import run_traced
from shapelens.runner.warm import WarmRunner
from shapelens.settings.groups import RunSettings, TracingOptions
from shapelens.settings.options import RunOptions
from shapelens.trace.codec import trace_to_json
from shapelens.trace.finding import finding_from_json

CORPUS_DIR = Path(__file__).resolve().parent
CATEGORIES = ("clean", "buggy")
DEFAULT_TIMEOUT_S = 120.0
SHAPE_ONLY_MARK = "# corpus: shape-only"
NOT_ALARMS = ("info",)
"""``info`` findings are notices (a deprecation torch announced), not alarms: not scored."""
DEFAULT_JOBS = 2


@dataclass(frozen=True)
class Program:
    """A corpus program: ``entry`` is run from ``cwd``; ``files`` hold its expectations."""

    name: str
    category: str
    entry: Path
    files: tuple[Path, ...]

    @property
    def cwd(self) -> Path:
        return self.entry.parent

    @property
    def shape_only(self) -> bool:
        """``# corpus: shape-only`` in the entry file: run with ``--fake`` (a bug only a GPU
        raises on, such as a CPU index into a CUDA embedding: the shape-only run simulates
        CUDA where ``meta`` would not)."""
        return SHAPE_ONLY_MARK in self.entry.read_text(encoding="utf-8")


@dataclass
class ProgramResult:
    program: Program
    expected: list[Expectation]
    findings: list[Finding] = field(default_factory=list)
    true_positives: list[Finding] = field(default_factory=list)
    false_positives: list[Finding] = field(default_factory=list)
    false_negatives: list[Expectation] = field(default_factory=list)
    causes_met: list[Expectation] = field(default_factory=list)
    wrong_causes: list[Finding] = field(default_factory=list)
    status: str | None = None
    exit_code: int | None = None
    exception: str | None = None
    duration_s: float = 0.0
    problems: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.program.name

    @property
    def ok(self) -> bool:
        return not (
            self.false_positives or self.false_negatives or self.wrong_causes or self.problems
        )

    @property
    def label(self) -> str:
        """``clean`` or ``buggy: KIND, ...`` (the ``# expect:`` kinds)."""
        kinds = sorted({e.kind for e in self.expected if e.marker == "expect"})
        return self.program.category + (": " + ", ".join(kinds) if kinds else "")


# -- discovering programs and expectations -------------------------------------------------


def discover(corpus_dir: Path = CORPUS_DIR) -> list[Program]:
    """Every program of the corpus, clean ones first, each category sorted by name."""
    corpus_dir = corpus_dir.resolve()
    programs: list[Program] = []
    for category in CATEGORIES:
        folder = corpus_dir / category
        if not folder.is_dir():
            continue
        for path in sorted(folder.iterdir()):
            if path.is_file() and path.suffix == ".py":
                programs.append(Program(f"{category}/{path.stem}", category, path, (path,)))
            elif path.is_dir() and (path / "main.py").is_file():
                files = tuple(sorted(p for p in path.rglob("*.py") if "__pycache__" not in p.parts))
                programs.append(
                    Program(f"{category}/{path.name}", category, path / "main.py", files)
                )
    return programs


def expectations(program: Program) -> list[Expectation]:
    """The ``# expect:`` and ``# cause:`` markers of all the program's files."""
    return read_markers(program.files)


# -- running one program ------------------------------------------------------------------


def child_env() -> dict[str, str]:
    env = dict(os.environ)
    # two programs at a time on a small machine: one intra-op thread each
    env.setdefault("OMP_NUM_THREADS", "1")
    # keep the corpus folders free of __pycache__
    env.setdefault("PYTHONDONTWRITEBYTECODE", "1")
    return env


def _child_python() -> list[str]:
    """``--python`` for the interpreter in ``SHAPELENS_TEST_PYTHON`` (the compatibility
    stage's torch and Python), else nothing: the programs run where ShapeLens runs."""
    python = os.environ.get("SHAPELENS_TEST_PYTHON")
    return ["--python", python] if python else []


def _read_findings(trace: dict[str, Any]) -> list[Finding]:
    findings: list[Finding] = []
    raw = trace.get("findings")
    if not isinstance(raw, list):
        return findings
    for item in raw:
        if not isinstance(item, dict):
            continue
        kind, file, line = item.get("kind"), item.get("file"), item.get("line")
        if not (isinstance(kind, str) and isinstance(file, str) and isinstance(line, int)):
            continue
        path = Path(file).resolve()
        findings.append(
            Finding(
                kind,
                path,
                line,
                str(item.get("severity", "")),
                _message(item),
                names=named_sites(item, path),
                has_chain=bool(item.get("chain")),
            )
        )
    return findings


def _message(item: dict[str, Any]) -> str:
    """The finding in words, as every ShapeLens surface renders it."""
    try:
        return finding_message(finding_from_json(item))
    except (KeyError, TypeError, ValueError):
        return str(item.get("kind", "?"))


def _describe_exception(trace: dict[str, Any]) -> str | None:
    exception = trace.get("exception")
    if not isinstance(exception, dict):
        return None
    text = f"{exception.get('type', '?')}: {exception.get('message', '')}".strip()
    first_line = text.splitlines()[0] if text else text
    where = ""
    if isinstance(exception.get("file"), str):
        where = f" at {Path(exception['file']).name}:{exception.get('line')}"
    return first_line[:200] + where


RunOutcome = tuple[dict[str, Any] | None, int | None, str | None, float]


def _run(program: Program, timeout_s: float, trace_dir: Path) -> RunOutcome:
    """(trace or None, exit status, harness error or None, seconds)."""
    trace_path = trace_dir / (program.name.replace("/", "__") + ".json")
    command = [
        sys.executable,
        "-m",
        "shapelens",
        "run",
        *_child_python(),
        "--json",
        str(trace_path),
        "--quiet",
        "--timeout",
        str(timeout_s),
        *(["--fake"] if program.shape_only else []),
        program.entry.name,
    ]
    started = time.monotonic()
    process = subprocess.Popen(
        command,
        cwd=program.cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=child_env(),
        start_new_session=True,
    )
    error: str | None = None
    try:
        output, _ = process.communicate(timeout=timeout_s + 30)
    except subprocess.TimeoutExpired:
        # our own child's process group only: the shapelens parent and the traced program
        os.killpg(process.pid, signal.SIGKILL)
        output, _ = process.communicate()
        error = f"no answer after {timeout_s + 30:.0f} s; killed"
    duration = time.monotonic() - started
    trace: dict[str, Any] | None = None
    if trace_path.exists():
        try:
            loaded = json.loads(trace_path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            error = f"unreadable trace: {exc}"
        else:
            if isinstance(loaded, dict):
                trace = loaded
    if trace is None and error is None:
        tail = output.decode("utf-8", "replace").strip().splitlines()[-3:]
        error = f"no trace written (exit {process.returncode}): " + " | ".join(tail)
    return trace, process.returncode, error, duration


def _run_warm(program: Program, timeout_s: float, warm: WarmRunner) -> RunOutcome:
    """As :func:`_run`, the child forked from ``warm`` (started with :func:`child_env`), as
    the language server runs a program: no interpreter start and ``import torch`` each."""
    output: list[str] = []
    options = RunOptions(
        tracing=TracingOptions(fake=program.shape_only),
        run=RunSettings(
            interpreter=os.environ.get("SHAPELENS_TEST_PYTHON") or sys.executable,
            timeout_s=timeout_s,
        ),
    )
    request = RunRequest(
        target=program.entry.name,
        cwd=str(program.cwd),
        env=child_env(),
        options=options,
        capture_output=True,
        stdin="empty",
    )
    started = time.monotonic()
    result = run_traced(request, on_output=lambda _, text: output.append(text), warm=warm)
    duration = time.monotonic() - started
    trace = json.loads(json.dumps(trace_to_json(result.trace)))  # as a trace file reads back
    if result.error is not None:
        tail = "".join(output).strip().splitlines()[-3:]
        return None, 2, f"no trace: {result.error} | " + " | ".join(tail), duration
    return trace, result.trace.exit_code, None, duration


def run_program(
    program: Program,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    ignore_severities: Collection[str] = NOT_ALARMS,
    warm: WarmRunner | None = None,
) -> ProgramResult:
    """Run and score ``program``: with ``shapelens run``, or forked from ``warm``."""
    result = ProgramResult(program, expectations(program))
    for expectation in result.expected:
        if expectation.kind not in SCORED_KINDS:
            result.problems.append(
                f"unknown kind in `# {expectation.marker}: {expectation.kind}` at "
                f"{expectation.file.name}:{expectation.line}"
            )
    if program.category == "clean" and result.expected:
        result.problems.append("a clean program has `# expect:` or `# cause:` comments")
    if program.category == "buggy" and not any(e.marker == "expect" for e in result.expected):
        result.problems.append("a buggy program has no `# expect:` comment")
    expected_sites = {e.site for e in result.expected if e.marker == "expect"}
    for cause in (e for e in result.expected if e.marker == "cause"):
        if cause.site in expected_sites:
            result.problems.append(
                f"`# cause:` on an `# expect:` line at {cause.file.name}:{cause.line}"
            )

    if warm is not None:
        trace, exit_code, error, duration = _run_warm(program, timeout_s, warm)
    else:
        with tempfile.TemporaryDirectory(prefix="shapelens-corpus-") as tmp:
            trace, exit_code, error, duration = _run(program, timeout_s, Path(tmp))
    result.exit_code = exit_code
    result.duration_s = duration
    if error is not None:
        result.problems.append(error)
    if trace is not None:
        status = trace.get("status")
        result.status = status if isinstance(status, str) else None
        result.exception = _describe_exception(trace)
        result.findings = _read_findings(trace)
        ran_to_the_end = result.status == "ok" or (result.status == "exit" and exit_code == 0)
        if program.category == "clean" and not ran_to_the_end:
            result.problems.append(
                f"the clean program did not run to the end under the tracer: status "
                f"{result.status}, exit {exit_code}"
                + (f", {result.exception}" if result.exception else "")
            )
        elif result.status == "timeout":
            result.problems.append(f"stopped by the {timeout_s:.0f} s time limit")
    verdict = score_findings(result.expected, result.findings, ignore_severities)
    result.true_positives = verdict.true_positives
    result.false_positives = verdict.false_positives
    result.false_negatives = verdict.false_negatives
    result.causes_met = verdict.causes_met
    result.wrong_causes = verdict.wrong_causes
    return result


def evaluate(
    corpus_dir: Path = CORPUS_DIR,
    *,
    jobs: int = DEFAULT_JOBS,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    only: Sequence[str] = (),
    ignore_severities: Collection[str] = NOT_ALARMS,
    warm: WarmRunner | None = None,
) -> list[ProgramResult]:
    """Run the corpus (at most ``jobs`` programs at a time) and score every program.
    ``only`` keeps programs whose name (``clean/vae``) contains one of its strings;
    findings with a severity in ``ignore_severities`` are not scored (by default every
    finding of a scored kind counts, ``info`` ones included)."""
    programs = discover(Path(corpus_dir))
    if only:
        programs = [p for p in programs if any(s in p.name for s in only)]
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        return list(
            pool.map(lambda p: run_program(p, timeout_s, ignore_severities, warm), programs)
        )


# -- scores and report --------------------------------------------------------------------


def score(
    results: Iterable[ProgramResult], kind: str | None = None, category: str | None = None
) -> Score:
    """The counts over ``results``: all of them, one kind's (``# expect:`` lines and
    findings of that kind) or one category's (``crash-line``, ``cause-line``, ``silent``).
    Overall, a met ``# cause:`` marker is a true positive and a wrong chain a false one."""
    tp = fp = fn = 0
    for result in results:
        if kind is None:
            tp += sum(1 for f in result.true_positives if category in (None, f.category))
            tp += sum(1 for e in result.causes_met if category in (None, e.category))
            fp += sum(1 for f in result.false_positives if category in (None, f.category))
            fp += len(result.wrong_causes) if category in (None, "cause-line") else 0
            fn += sum(1 for e in result.false_negatives if category in (None, e.category))
        else:
            tp += sum(1 for f in result.true_positives if f.kind == kind)
            fp += sum(1 for f in result.false_positives if f.kind == kind)
            fn += sum(1 for e in result.false_negatives if e.kind == kind and e.marker == "expect")
    return Score(tp, fp, fn)


def _ratio(value: float | None) -> str:
    return "  -  " if value is None else f"{value:5.2f}"


def _where(file: Path, line: int, program: Program) -> str:
    try:
        name = file.relative_to(program.cwd).as_posix()
    except ValueError:
        name = str(file)
    return f"{name}:{line}"


def _missed(e: Expectation, r: ProgramResult) -> str:
    """A false negative in words, with the findings near it."""
    where = _where(e.file, e.line, r.program)
    if e.marker == "cause":
        naming = [
            f"{f.kind}@{_where(f.file, f.line, r.program)}" for f in r.findings if e.site in f.names
        ]
        return f"    FN cause {e.kind} at {where}: no {e.kind} finding names it" + (
            f" (named by: {', '.join(naming)})" if naming else ""
        )
    near = [
        f"{f.kind}@{f.line}" for f in r.findings if f.file == e.file and abs(f.line - e.line) <= 3
    ]
    return (
        f"    FN {e.kind} expected at {where}"
        + (f" (findings nearby: {', '.join(near)})" if near else "")
        + (f"; run ended with {r.exception}" if r.exception else "")
    )


def report(results: Sequence[ProgramResult], out: Any = None) -> str:
    """The table, the list of disagreements and the scores, as text (also written to
    ``out`` when given)."""
    lines: list[str] = []
    width = max([len(r.name) for r in results] + [7])
    lines.append(
        f"{'program':<{width}}  {'status':<9} {'time':>6}  {'exp':>3} {'tp':>3} {'fp':>3} "
        f"{'fn':>3} {'cause':>5}  result"
    )
    lines.append("-" * (width + 50))
    for r in results:
        verdict = "ok" if r.ok else "MISMATCH"
        causes = len(r.causes_met) + sum(1 for e in r.false_negatives if e.marker == "cause")
        expects = len(r.expected) - causes
        lines.append(
            f"{r.name:<{width}}  {r.status or '-':<9} {r.duration_s:5.1f}s  {expects:>3} "
            f"{len(r.true_positives):>3} {len(r.false_positives):>3} "
            f"{len(r.false_negatives) - (causes - len(r.causes_met)):>3} "
            f"{f'{len(r.causes_met)}/{causes}' if causes else '-':>5}  {verdict}"
        )

    disagreements = [r for r in results if not r.ok]
    if disagreements:
        lines.append("")
        lines.append("Disagreements:")
        for r in disagreements:
            lines.append(f"  {r.name} ({r.label})")
            for problem in r.problems:
                lines.append(f"    problem: {problem}")
            for f in r.false_positives:
                lines.append(
                    f"    FP {f.kind} ({f.severity}) at {_where(f.file, f.line, r.program)}: "
                    f"{f.message}"
                )
            for e in r.false_negatives:
                lines.append(_missed(e, r))
            for f in r.wrong_causes:
                lines.append(
                    f"    FP cause: the {f.kind} at {_where(f.file, f.line, r.program)} shows a "
                    f"chain that names no `# cause:` line"
                )

    lines.append("")
    lines.append(f"{'':<16} {'tp':>4} {'fp':>4} {'fn':>4}  {'precision':>9}  {'recall':>6}")
    rows = [(c, score(results, category=c)) for c in SCORE_CATEGORIES]
    rows += [(k, score(results, k)) for k in SCORED_KINDS]
    rows.append(("overall", score(results)))
    for name, s in rows:
        lines.append(
            f"{name:<16} {s.true_positives:>4} {s.false_positives:>4} {s.false_negatives:>4}  "
            f"{_ratio(s.precision):>9}  {_ratio(s.recall):>6}"
        )
        if name in (SCORE_CATEGORIES[-1], SCORED_KINDS[-1]):
            lines.append("")
    clean = [r for r in results if r.program.category == "clean"]
    buggy = [r for r in results if r.program.category == "buggy"]
    lines.append(
        f"clean programs without a false alarm: "
        f"{sum(1 for r in clean if not r.false_positives)}/{len(clean)}; "
        f"buggy programs fully right: {sum(1 for r in buggy if r.ok)}/{len(buggy)}; "
        f"programs that agree: {sum(1 for r in results if r.ok)}/{len(results)}"
    )
    text = "\n".join(lines)
    if out is not None:
        print(text, file=out)
    return text


def _score_json(s: Score) -> dict[str, Any]:
    return {
        "true_positives": s.true_positives,
        "false_positives": s.false_positives,
        "false_negatives": s.false_negatives,
        "precision": s.precision,
        "recall": s.recall,
    }


def to_json(results: Sequence[ProgramResult]) -> dict[str, Any]:
    """``scores`` (per category, per kind, overall) and ``programs`` (each one's markers,
    findings and disagreements)."""

    def finding(f: Finding) -> dict[str, Any]:
        return {
            "kind": f.kind,
            "category": f.category,
            "file": str(f.file),
            "line": f.line,
            "severity": f.severity,
            "message": f.message,
        }

    def marker(e: Expectation) -> dict[str, Any]:
        return {
            "kind": e.kind,
            "marker": e.marker,
            "category": e.category,
            "file": str(e.file),
            "line": e.line,
        }

    scores = {c: _score_json(score(results, category=c)) for c in SCORE_CATEGORIES}
    scores.update({k: _score_json(score(results, k)) for k in SCORED_KINDS})
    scores["overall"] = _score_json(score(results))
    programs = [
        {
            "program": r.name,
            "category": r.program.category,
            "ok": r.ok,
            "status": r.status,
            "exit_code": r.exit_code,
            "exception": r.exception,
            "duration_s": round(r.duration_s, 2),
            "expected": [marker(e) for e in r.expected],
            "true_positives": [finding(f) for f in r.true_positives],
            "false_positives": [finding(f) for f in r.false_positives],
            "false_negatives": [marker(e) for e in r.false_negatives],
            "causes_met": [marker(e) for e in r.causes_met],
            "wrong_causes": [finding(f) for f in r.wrong_causes],
            "problems": r.problems,
        }
        for r in results
    ]
    return {"scores": scores, "programs": programs}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=CORPUS_DIR, help="corpus folder")
    parser.add_argument("--jobs", type=int, default=DEFAULT_JOBS, help="programs at a time")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, help="seconds each")
    parser.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="NAME",
        help="run programs whose name contains NAME (repeatable)",
    )
    parser.add_argument(
        "--ignore-severity",
        action="append",
        default=None,
        choices=("info", "warning", "error"),
        help="do not score findings of this severity (repeatable; default: info)",
    )
    parser.add_argument("--json", type=Path, help="also write the results as JSON")
    args = parser.parse_args(argv)
    results = evaluate(
        args.corpus,
        jobs=args.jobs,
        timeout_s=args.timeout,
        only=args.only,
        ignore_severities=NOT_ALARMS if args.ignore_severity is None else args.ignore_severity,
    )
    if not results:
        print("no programs found", file=sys.stderr)
        return 2
    report(results, out=sys.stdout)
    if args.json is not None:
        args.json.write_text(json.dumps(to_json(results), indent=2) + "\n", encoding="utf-8")
    return 0 if all(r.ok for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
