"""``shapelens doctor``: the interpreter a run would use, its torch and tracing core, and the
trace folders, as a bug report wants them (:mod:`shapelens.runner.doctor`)."""

from __future__ import annotations

import argparse
import json
import os
import sys

from shapelens.runner.doctor import Unusable, diagnose, report

TRACE_DIR_VARIABLE = "SHAPELENS_TRACE_DIR"
NOTEBOOK_FOLDER = ".shapelens"
"""Where a notebook kernel writes its traces, unless $SHAPELENS_TRACE_DIR says elsewhere."""


def add_doctor(doctor: argparse.ArgumentParser) -> None:
    doctor.add_argument(
        "--python",
        metavar="PATH",
        default=sys.executable,
        help="the interpreter a run would use, as `shapelens run --python` (default: this one)",
    )
    doctor.add_argument(
        "--trace-dir",
        action="append",
        default=[],
        metavar="DIR",
        help="a trace folder to check (default: $SHAPELENS_TRACE_DIR and ./.shapelens)",
    )
    doctor.add_argument("--json", action="store_true", help="one JSON object, for machines")


def doctor(options: argparse.Namespace) -> int:
    """The report on stdout; an interpreter that cannot be used: one line, status 1."""
    folders = options.trace_dir or [
        *filter(None, [os.environ.get(TRACE_DIR_VARIABLE)]),
        os.path.abspath(NOTEBOOK_FOLDER),
    ]
    try:
        diagnosis = diagnose(options.python, folders)
    except Unusable as err:
        print(f"shapelens doctor: {err}", file=sys.stderr)
        return 1
    if options.json:
        print(json.dumps(diagnosis.to_json(), indent=2))
    else:
        sys.stdout.write(report(diagnosis))
    return 0
