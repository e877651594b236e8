"""Run a script under a line tracer that does nothing: the floor any line tracer of the
script's own code pays, whatever it records.

3.11: ``sys.settrace`` with a function that asks for the line events of frames of files
under the script's folder and returns None elsewhere (CPython still runs every Python
function in tracing mode and calls it on each call). 3.12+: a ``sys.monitoring`` tool with
``PY_START`` on, which switches itself off for code outside the folder and turns on the
``LINE`` events of code inside it, whose callback does nothing.

Usage: python noop_tracer.py SCRIPT [ARGS...]
"""

from __future__ import annotations

import os
import runpy
import sys
from types import CodeType, FrameType
from typing import Any


def _settrace(root: str) -> None:
    def local(frame: FrameType, event: str, arg: Any) -> Any:
        return local

    def global_(frame: FrameType, event: str, arg: Any) -> Any:
        return local if frame.f_code.co_filename.startswith(root) else None

    sys.settrace(global_)


_TOOL = 1  # sys.monitoring's PROFILER_ID (ShapeLens uses 3 to 5)


def _monitoring(root: str) -> None:
    monitoring = sys.monitoring
    monitoring.use_tool_id(_TOOL, "noop")
    events = monitoring.events

    def started(code: CodeType, offset: int) -> Any:
        if code.co_filename.startswith(root):
            monitoring.set_local_events(_TOOL, code, events.LINE)
        return monitoring.DISABLE

    def line(code: CodeType, number: int) -> None:
        return None

    monitoring.register_callback(_TOOL, events.PY_START, started)
    monitoring.register_callback(_TOOL, events.LINE, line)
    monitoring.set_events(_TOOL, events.PY_START)


def install_noop_tracer(root: str) -> None:
    """A no-op line tracer of the code of files under ``root`` (this thread)."""
    if sys.version_info >= (3, 12):
        _monitoring(root)
    else:
        _settrace(root)


def remove_noop_tracer() -> None:
    if sys.version_info >= (3, 12):
        sys.monitoring.set_events(_TOOL, 0)
        sys.monitoring.free_tool_id(_TOOL)
    else:
        sys.settrace(None)


def main() -> None:
    script = os.path.abspath(sys.argv[1])
    root = os.path.dirname(script) + os.sep
    sys.argv = sys.argv[1:]
    sys.path[0] = os.path.dirname(script)
    install_noop_tracer(root)
    runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main()
