"""``workspace/executeCommand``: shapelens.run, shapelens.runFunction, shapelens.cancel,
shapelens.clear. Running user code happens only here, never on open, save or hover."""

from __future__ import annotations

import os
from typing import Any

from lsprotocol import types

from shapelens.lsp.publish import publish_file
from shapelens.lsp.runs import InvalidRunParams, parse_run_params, read_lines
from shapelens.lsp.server import ShapeLensServer
from shapelens.trace import load_trace
from shapelens.trace.codec import TraceFormatError

COMMANDS = (
    "shapelens.loadTrace",
    "shapelens.run",
    "shapelens.runFunction",
    "shapelens.cancel",
    "shapelens.clear",
    "shapelens.inlineValueExpression",
)


def _first(args: tuple[Any, ...]) -> Any:
    return args[0] if args else None


def _error(ls: ShapeLensServer, message: str) -> dict[str, Any]:
    ls.window_show_message(
        types.ShowMessageParams(type=types.MessageType.Error, message=f"ShapeLens: {message}")
    )
    return {"status": "error", "message": message}


def register(server: ShapeLensServer) -> None:
    async def run(ls: ShapeLensServer, *args: Any) -> dict[str, Any]:
        try:
            params = parse_run_params(_first(args))
        except InvalidRunParams as err:
            ls.window_show_message(
                types.ShowMessageParams(type=types.MessageType.Error, message=f"ShapeLens: {err}")
            )
            return {"status": "error", "message": str(err)}
        return await ls.runs.run(params)

    server.command("shapelens.run")(run)
    server.command("shapelens.runFunction")(run)

    @server.command("shapelens.cancel")
    def cancel(ls: ShapeLensServer, *args: Any) -> dict[str, Any]:
        from shapelens.lsp.server import path_of

        argument = _first(args)
        uri = argument.get("uri") if isinstance(argument, dict) else None
        return {"cancelled": ls.runs.cancel(path_of(uri) if isinstance(uri, str) else None)}

    @server.command("shapelens.loadTrace")
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
        touched = ls.results.update(trace, sources, owner=os.path.realpath(path))
        for file in touched:
            publish_file(ls, file)
        if ls.supports_inlay_refresh():
            ls.workspace_inlay_hint_refresh(None)
        return {"status": trace.status, "lines": len(trace.lines), "findings": len(trace.findings)}

    @server.command("shapelens.inlineValueExpression")
    def inline_value_expression(ls: ShapeLensServer, *args: Any) -> str:
        """What an editor evaluates (DAP ``evaluate``) in a paused frame for tensor values."""
        from shapelens.debug.inline_values import EXPRESSION

        return EXPRESSION

    @server.command("shapelens.clear")
    def clear(ls: ShapeLensServer, *args: Any) -> dict[str, Any]:
        from shapelens.lsp.server import path_of

        argument = _first(args)
        uri = argument.get("uri") if isinstance(argument, dict) else None
        cleared = ls.results.clear(path_of(uri) if isinstance(uri, str) else None)
        for path in cleared:
            publish_file(ls, path)
        if ls.supports_inlay_refresh():
            ls.workspace_inlay_hint_refresh(None)
        return {"cleared": len(cleared)}
