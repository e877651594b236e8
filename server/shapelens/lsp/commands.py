"""``workspace/executeCommand``: shapelens.run, shapelens.runFunction, shapelens.cancel,
shapelens.clear, shapelens.loadTrace, shapelens.modules, shapelens.doctor. Running user code
happens only here, never on open, save or hover."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Callable
from typing import Any

from lsprotocol import types

from shapelens.debug.inline_values import EXPRESSION
from shapelens.lsp.runs import InvalidRunParams, parse_run_params, read_lines
from shapelens.lsp.state import ShapeLensServer
from shapelens.lsp.uris import path_of
from shapelens.present.modules import module_summary, slot_text
from shapelens.runner.doctor import Unusable, diagnose, report
from shapelens.trace import load_trace
from shapelens.trace.codec import TraceFormatError, module_to_json


def _first(args: tuple[Any, ...]) -> Any:
    return args[0] if args else None


def _error(ls: ShapeLensServer, message: str) -> dict[str, Any]:
    ls.show_message(types.MessageType.Error, f"ShapeLens: {message}")
    return {"status": "error", "message": message}


def _path_argument(args: tuple[Any, ...]) -> str | None:
    """The path of ``{"uri": ...}``; None when absent (meaning: every file)."""
    argument = _first(args)
    uri = argument.get("uri") if isinstance(argument, dict) else None
    return path_of(uri) if isinstance(uri, str) else None


async def run(ls: ShapeLensServer, *args: Any) -> dict[str, Any]:
    try:
        params = parse_run_params(_first(args))
    except InvalidRunParams as err:
        return _error(ls, str(err))
    return await ls.runs.run(params)


def cancel(ls: ShapeLensServer, *args: Any) -> dict[str, Any]:
    return {"cancelled": ls.runs.cancel(_path_argument(args))}


def load_trace_file(ls: ShapeLensServer, *args: Any) -> dict[str, Any]:
    """Show a trace written elsewhere (``--json``, ``SHAPELENS_TRACE``, ``merge``): run on a
    remote box, copy the file, see the hints. Nothing is executed."""
    argument = _first(args)
    path = argument.get("path") if isinstance(argument, dict) else None
    if not isinstance(path, str):
        return _error(ls, 'expected one argument {"path": "/abs/trace.json"}')
    try:
        trace = load_trace(path)
    except (OSError, TraceFormatError) as err:
        return _error(ls, f"cannot load {path}: {err}")
    sources = {file: read_lines(file) for file in trace.files}
    ls.show_results(trace, sources, owner=os.path.realpath(path))
    return {"status": trace.status, "lines": len(trace.lines), "findings": len(trace.findings)}


def inline_value_expression(ls: ShapeLensServer, *args: Any) -> str:
    """What an editor evaluates (DAP ``evaluate``) in a paused frame for tensor values."""
    return EXPRESSION


def modules(ls: ShapeLensServer, *args: Any) -> dict[str, Any]:
    """The module tree of a file's last run (trace format's ``modules``, each with the
    editor's texts: ``summary`` and each slot's ``text``)."""
    path = _path_argument(args)
    if path is None:
        return _error(ls, 'expected one argument {"uri": "file:///abs/script.py"}')
    found = []
    for module in ls.results.modules_of(path):
        entry = module_to_json(module)
        entry["rank"] = module.rank
        entry["calls_sampled"] = module.calls_sampled
        entry["summary"] = module_summary(module)
        for key, slots in (("inputs", module.inputs), ("outputs", module.outputs)):
            for data, slot in zip(entry[key], slots, strict=True):
                data.setdefault("dim_ranges", None)
                data["text"] = slot_text(slot)
        found.append(entry)
    return {"modules": found}


def clear(ls: ShapeLensServer, *args: Any) -> dict[str, Any]:
    cleared = ls.results.clear(_path_argument(args))
    ls.publish(cleared)
    return {"cleared": len(cleared)}


async def doctor(ls: ShapeLensServer, *args: Any) -> dict[str, Any]:
    """``shapelens doctor`` for the interpreter and environment the server's runs use:
    ``{"report": TEXT, "diagnosis": {...}}``, or ``{"report": ONE_LINE, "error": ...}`` when
    that interpreter cannot be used. The editor's effective settings, passed as
    ``{"settings": {...}}``, are part of the report."""
    argument = _first(args)
    settings = argument.get("settings") if isinstance(argument, dict) else None
    shown = settings if isinstance(settings, dict) else None
    python = ls.settings.run.interpreter or sys.executable
    env = {**os.environ, **ls.settings.run.extra_env}
    folders = ls.kernel_trace_dirs()
    try:
        diagnosis = await asyncio.to_thread(diagnose, python, folders, env=env, settings=shown)
    except Unusable as err:
        return {"report": f"shapelens doctor: {err}\n", "error": str(err)}
    return {"report": report(diagnosis), "diagnosis": diagnosis.to_json()}


COMMANDS: dict[str, Callable[..., Any]] = {
    "shapelens.loadTrace": load_trace_file,
    "shapelens.run": run,
    "shapelens.runFunction": run,
    "shapelens.cancel": cancel,
    "shapelens.clear": clear,
    "shapelens.inlineValueExpression": inline_value_expression,
    "shapelens.modules": modules,
    "shapelens.doctor": doctor,
}
"""Command → handler, registered by ``lsp.server.create_server``."""
