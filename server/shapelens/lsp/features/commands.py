"""``workspace/executeCommand``: shapelens.run, shapelens.runFunction, shapelens.cancel,
shapelens.clear. Running user code happens only here, never on open, save or hover."""

from __future__ import annotations

from typing import Any

from lsprotocol import types

from shapelens.lsp.publish import publish_file
from shapelens.lsp.runs import InvalidRunParams, parse_run_params
from shapelens.lsp.server import ShapeLensServer

COMMANDS = (
    "shapelens.run",
    "shapelens.runFunction",
    "shapelens.cancel",
    "shapelens.clear",
    "shapelens.inlineValueExpression",
)


def _first(args: tuple[Any, ...]) -> Any:
    return args[0] if args else None


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
