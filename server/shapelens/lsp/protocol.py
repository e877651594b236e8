"""The server's JSON-RPC protocol: every request gets an answer.

pygls structures a message inside its reader (``json.loads``'s object hook); when a request's
params do not fit lsprotocol's types it raises there, the reader logs a traceback, and the
client waits for ever. Here such a request is answered with an ``InvalidParams`` error, and a
notification that does not fit (it may get no response) costs one line of the client's log."""

from __future__ import annotations

import re
from typing import Any, Final

from cattrs.v import format_exception, transform_error
from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams
from pygls.protocol import JsonRPCNotification, JsonRPCRequestMessage, LanguageServerProtocol

_REFUSED: Final = object()
"""What ``structure_message`` returns for a message it answered itself: the reader hands it
to ``handle_message``, which drops it."""

_MAX_PROBLEMS = 3


class ShapeLensProtocol(LanguageServerProtocol):
    def structure_message(self, data: dict[str, Any]) -> Any:
        # The hook sees every JSON object, innermost first: only whole messages name "jsonrpc".
        # Responses (an "id" without a "method", or an "error") keep pygls' handling.
        if "jsonrpc" not in data or "error" in data or ("id" in data and "method" not in data):
            return super().structure_message(data)
        method = data.get("method")
        try:
            fallback = JsonRPCRequestMessage if "id" in data else JsonRPCNotification
            return self._converter.structure(data, self.get_message_type(method) or fallback)
        except Exception as exc:  # anything a client sent can fail to structure
            self._refuse(data, f"invalid params for {method}: {_problems(exc)}")
            return _REFUSED

    def handle_message(self, message: Any) -> None:
        if message is not _REFUSED:
            super().handle_message(message)

    def _refuse(self, data: dict[str, Any], text: str) -> None:
        msg_id = data.get("id")
        if isinstance(msg_id, (int, str)) and not isinstance(msg_id, bool):
            self._send_response(msg_id, None, JsonRpcInvalidParams(text).to_response_error())
            return
        # A notification (or an id no response could carry): JSON-RPC allows no answer.
        what = "a notification" if "id" not in data else "a request without a valid id"
        self.notify(
            types.WINDOW_LOG_MESSAGE,
            types.LogMessageParams(
                type=types.MessageType.Warning, message=f"ShapeLens ignored {what}: {text}"
            ),
        )


def _problems(exc: Exception) -> str:
    """What did not fit, on one line, in the protocol's names: ``params.textDocument:
    required field missing`` (cattrs says ``$.params.text_document``)."""
    found = []
    for problem in transform_error(exc, path="$", format_exception=_problem):
        why, _, path = problem.rpartition(" @ ")
        path = re.sub(r"_([a-z])", lambda m: m.group(1).upper(), path.removeprefix("$."))
        found.append(f"{path}: {why}" if path != "$" else why)
    more = len(found) - _MAX_PROBLEMS
    text = "; ".join(found[:_MAX_PROBLEMS]) + (f" (and {more} more)" if more > 0 else "")
    return " ".join(text.split())


def _problem(exc: BaseException, expected: type | None) -> str:
    # lsprotocol's range checks say what they wanted ("Position.line should be in range
    # [0:2147483647], but was -1."); cattrs' default would say only "invalid value".
    if isinstance(exc, ValueError) and str(exc):
        return str(exc)
    return format_exception(exc, expected)
