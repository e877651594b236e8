"""Whole training scripts, untraced against `shapelens run`, as a user times them: wall time
from start to exit and CPU time (the process and its children), alternating untraced and
traced runs, median of N each. Programs in `programs/`; the library ones run on the 3.12
venv, which has the libraries, through `shapelens run --python` (skipped, with the reason,
where it is not there).

With `--breakdown`, the char-level GPT instead runs untraced, traced, and traced with each
mechanism switched off in turn (`SHAPELENS_OFF`, `shapelens/engine/switches.py`), all
interleaved: what each mechanism costs is what switching it off saves. A no-op tracer of
the same kind (`sys.settrace`, or a `sys.monitoring` tool with line events on the script's
code) gives the floor that any line tracer pays.

Usage: real_programs.py [--repeat N] [--programs a,b] [--breakdown] [--out FILE]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from report import emit  # bench/ is on sys.path: these scripts run as files

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
PROGRAMS_DIR = BENCH / "programs"
LIBRARY_PYTHON = ROOT / ".venv312" / "bin" / "python"  # make test's: torch 2.14, the libraries
TARGET = 1.15  # issue 41: a whole training script traced against untraced


@dataclass(frozen=True)
class Program:
    name: str
    label: str
    script: Path
    python: Path


PROGRAMS = (
    Program("char_gpt", "char-level GPT, DataLoader, AdamW, 60 steps (3.11)",
            PROGRAMS_DIR / "char_gpt" / "train.py", Path(sys.executable)),
    Program("char_gpt_312", "char-level GPT, DataLoader, AdamW, 60 steps (3.12)",
            PROGRAMS_DIR / "char_gpt" / "train.py", ROOT / ".venv312" / "bin" / "python"),
    Program("gpt2_hf", "transformers GPT-2 from a small config, 10 steps",
            PROGRAMS_DIR / "gpt2_hf.py", LIBRARY_PYTHON),
    Program("gpt2_trainer", "transformers GPT-2 under the library's Trainer, 40 steps",
            PROGRAMS_DIR / "gpt2_trainer.py", LIBRARY_PYTHON),
    Program("timm_resnet", "timm ResNet-18, 5 steps",
            PROGRAMS_DIR / "timm_resnet.py", LIBRARY_PYTHON),
    Program("lightning", "Lightning module under a Trainer, 1 epoch",
            PROGRAMS_DIR / "lightning_module.py", LIBRARY_PYTHON),
)  # fmt: skip


@dataclass
class Sample:
    wall_s: float
    cpu_s: float


def run_once(command: list[str], cwd: Path, env: dict[str, str] | None = None) -> Sample:
    """One run to its exit: wall time and the CPU time of every process it started."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(
        command, cwd=cwd, capture_output=True, timeout=900, env={**_env(), **(env or {})}
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed:\n{done.stderr.decode()[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return Sample(wall, cpu)


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("SHAPELENS_FORK_SERVER", None)  # a user's first run: no warm fork server
    return env


def commands(program: Program) -> tuple[list[str], list[str]]:
    """(untraced, traced): the same interpreter runs the script in both."""
    untraced = [str(program.python), program.script.name]
    if program.python == Path(sys.executable):
        traced = [sys.executable, "-m", "shapelens", "run", "--quiet", program.script.name]
    else:
        traced = [sys.executable, "-m", "shapelens", "run", "--quiet",
                  "--python", str(program.python), program.script.name]  # fmt: skip
    return untraced, traced


def measure(program: Program, repeat: int) -> tuple[list[Sample], list[Sample]]:
    untraced, traced = commands(program)
    cwd = program.script.parent
    run_once(untraced, cwd)  # warm the page cache: the first import reads torch from disk
    plain: list[Sample] = []
    mine: list[Sample] = []
    for round_ in range(repeat):  # alternating, the order flipped each round
        pair = (untraced, traced) if round_ % 2 == 0 else (traced, untraced)
        for command in pair:
            (plain if command is untraced else mine).append(run_once(command, cwd))
    return plain, mine


SWITCHED = ("reads", "op_watch", "modules", "flusher", "tracing")  # the engine's MECHANISMS
SWITCH_LABELS = {
    "reads": "reading statements' values",
    "op_watch": "the op watch (checked statements' torch calls)",
    "modules": "the module tree",
    "flusher": "the background flushes",
    "tracing": "all tracing (start-up, the runner and its channel left)",
}


def breakdown(program: Program, repeat: int) -> list[str]:
    """Untraced, traced, traced with each mechanism off, the no-op tracer: interleaved."""
    untraced, traced = commands(program)
    floor = [str(program.python), str(BENCH / "noop_tracer.py"), program.script.name]
    variants: list[tuple[str, list[str], dict[str, str]]] = [
        ("untraced", untraced, {}),
        ("traced, everything on (the default)", traced, {}),
        *((f"traced, {SWITCH_LABELS[name]} off", traced, {"SHAPELENS_OFF": name})
          for name in SWITCHED),
        ("a no-op line tracer of the script's code (the floor)", floor, {}),
    ]  # fmt: skip
    cwd = program.script.parent
    run_once(untraced, cwd)  # the page cache
    samples: dict[str, list[Sample]] = {label: [] for label, _, _ in variants}
    for round_ in range(repeat):
        order = variants if round_ % 2 == 0 else variants[::-1]
        for label, command, env in order:
            samples[label].append(run_once(command, cwd, env))
    cpu = {label: statistics.median(s.cpu_s for s in runs) for label, runs in samples.items()}
    base, full = cpu["untraced"], cpu["traced, everything on (the default)"]
    rows = []
    for label, _, env in variants:
        saved = f"{(full - cpu[label]) / base:+.3f}×" if env else ""
        rows.append(f"| {label} | {cpu[label]:.2f} s | {cpu[label] / base:.3f}× | {saved} |")
    return [
        f"Where the time goes: {program.label}, CPU time start to exit (children included), "
        f"median of {repeat} interleaved rounds. The last column is what switching the "
        "mechanism off saves, as a share of the untraced run.",
        "",
        "| run | CPU | ratio | saved |",
        "|---|---:|---:|---:|",
        *rows,
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--programs", help="comma-separated names (default: all)")
    parser.add_argument("--breakdown", action="store_true", help="per mechanism (char GPT)")
    parser.add_argument("--out", type=Path)
    options = parser.parse_args()
    if options.breakdown:
        names = (options.programs or "char_gpt").split(",")
        lines: list[str] = []
        for program in PROGRAMS:
            if program.name in names and program.python.exists():
                lines += [*breakdown(program, options.repeat), ""]
        emit(lines, options.out)
        return 0
    chosen = set(options.programs.split(",")) if options.programs else None
    rows: list[str] = []
    skipped: list[str] = []
    for program in PROGRAMS:
        if chosen is not None and program.name not in chosen:
            continue
        if not program.python.exists():
            skipped.append(f"{program.name}: {program.python} is not there (made by `make test`)")
            continue
        plain, mine = measure(program, options.repeat)
        wall = [statistics.median(s.wall_s for s in samples) for samples in (plain, mine)]
        cpu = [statistics.median(s.cpu_s for s in samples) for samples in (plain, mine)]
        rows.append(
            f"| {program.label} | {wall[0]:.2f} s | {wall[1]:.2f} s | {wall[1] / wall[0]:.2f}× "
            f"| {cpu[0]:.2f} s | {cpu[1]:.2f} s | {cpu[1] / cpu[0]:.2f}× | ≤ {TARGET}× |"
        )
    lines = [
        f"Real programs: whole process (start to exit), untraced against `shapelens run "
        f"--quiet`, median of {options.repeat} alternating runs each; CPU time counts the "
        "process and its children. Library programs run on Python 3.12 with torch 2.14 "
        "through `--python`.",
        "",
        "| program | untraced wall | traced wall | wall ratio | untraced CPU | traced CPU "
        "| CPU ratio | target |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
        *rows,
    ]
    lines += [f"\nNot measured: {reason}." for reason in skipped]
    emit(lines, options.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
