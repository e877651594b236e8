"""Language server protocol surface: capabilities, code lens, settings, bad requests, and
that code runs only on a command (numpy only: runs on every interpreter)."""

from __future__ import annotations

import asyncio
import uuid
from concurrent.futures import Future
from typing import Any

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcException

from conftest import LspSession, line_of, need

ANSWER_WITHIN_S = 5
"""How long a test waits for an answer: a server that never answers fails, not hangs."""

SCRIPT = """
import numpy as np
from torch import nn

def helper(a):
    doubled = a * 2
    return doubled

class Block(nn.Module):
    def forward(self, x):
        return x

if __name__ == "__main__":
    out = helper(np.ones((2, 3)))
"""


async def test_capabilities(lsp: LspSession) -> None:
    assert lsp.initialize_result is not None
    result = lsp.initialize_result.capabilities
    assert result.text_document_sync is not None
    assert result.inlay_hint_provider
    assert result.hover_provider
    assert result.code_lens_provider is not None
    assert result.execute_command_provider is not None
    commands = set(result.execute_command_provider.commands)
    assert {
        "shapelens.run",
        "shapelens.runFunction",
        "shapelens.cancel",
        "shapelens.clear",
    } <= commands


async def test_code_lens(lsp: LspSession) -> None:
    path, _ = lsp.write("main.py", SCRIPT)
    uri = lsp.open(path)
    lenses = await lsp.client.text_document_code_lens_async(
        types.CodeLensParams(text_document=types.TextDocumentIdentifier(uri=uri))
    )
    found = {
        (lens.range.start.line, lens.command.command, lens.command.arguments[0].get("function"))  # type: ignore[union-attr,index]
        for lens in lenses or []
    }
    assert found == {
        (line_of(path, "def helper") - 1, "shapelens.runFunction", "helper"),
        (line_of(path, "def forward") - 1, "shapelens.runFunction", "Block.forward"),
        (line_of(path, "if __name__") - 1, "shapelens.run", None),
    }
    assert all(lens.command.title == "▶ Run with ShapeLens" for lens in lenses or [])  # type: ignore[union-attr]


async def test_run_function_from_a_code_lens(lsp: LspSession) -> None:
    path, _ = lsp.write(
        "main.py", SCRIPT.replace("from torch import nn\n", "").replace("(nn.Module)", "")
    )
    uri = lsp.open(path)
    result = await lsp.client.workspace_execute_command_async(
        types.ExecuteCommandParams(
            command="shapelens.runFunction", arguments=[{"uri": uri, "function": "helper"}]
        )
    )
    assert result["status"] == "ok"
    hover = await lsp.client.text_document_hover_async(
        types.HoverParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            position=types.Position(line_of(path, "def helper") - 1, 1),  # on `def`
        )
    )
    assert hover is not None and "**a**" in hover.contents.value  # type: ignore[union-attr]
    hints = await lsp.hints(uri)
    assert hints == {
        line_of(path, "def helper") - 1: "a (2,3)",
        line_of(path, "doubled =") - 1: "doubled (2,3)",
        line_of(path, "return doubled") - 1: "<return> (2,3)",
    }


async def test_code_runs_only_on_a_command(lsp: LspSession) -> None:
    marker = lsp.root / "ran.txt"
    path, _ = lsp.write("main.py", f"open({str(marker)!r}, 'w').write('ran')\n")
    uri = lsp.open(path)
    lsp.client.text_document_did_save(
        types.DidSaveTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri))
    )
    await lsp.client.text_document_hover_async(
        types.HoverParams(
            text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(0, 1)
        )
    )
    await lsp.hints(uri)
    assert not marker.exists()
    await lsp.run(uri)
    assert marker.read_text() == "ran"


async def test_bad_requests_get_empty_answers(lsp: LspSession) -> None:
    unknown = (lsp.root / "never-opened.py").as_uri()
    assert await lsp.hints(unknown) == {}
    assert (
        await lsp.client.text_document_hover_async(
            types.HoverParams(
                text_document=types.TextDocumentIdentifier(uri=unknown),
                position=types.Position(3, 3),
            )
        )
        is None
    )
    path, _ = lsp.write("main.py", "import numpy as np\nx = np.ones(2)\n")
    uri = lsp.open(path)
    await lsp.run(uri)
    for position in (types.Position(99, 0), types.Position(1, 500)):
        hover = await lsp.client.text_document_hover_async(
            types.HoverParams(
                text_document=types.TextDocumentIdentifier(uri=uri), position=position
            )
        )
        assert hover is None
    lenses = await lsp.client.text_document_code_lens_async(
        types.CodeLensParams(text_document=types.TextDocumentIdentifier(uri=unknown))
    )
    assert not lenses


async def _raw_request(lsp: LspSession, method: str, params: Any) -> Any:
    """Sends ``method`` as a client that got its params wrong would: plain JSON, past
    lsprotocol's typed requests (which refuse to serialise bad params). pygls has no public
    way: this is its ``send_request`` with a dict for the message."""
    protocol = lsp.client.protocol
    msg_id = f"raw-{uuid.uuid4()}"
    answer: Future[Any] = Future()
    protocol._request_futures[msg_id] = answer
    protocol._send_data({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})
    return await asyncio.wait_for(asyncio.wrap_future(answer), ANSWER_WITHIN_S)


async def _still_answers(lsp: LspSession) -> None:
    """The connection is healthy: a valid request on it is answered as usual."""
    path, _ = lsp.write("main.py", SCRIPT)
    uri = lsp.open(path)
    lenses = await asyncio.wait_for(
        lsp.client.text_document_code_lens_async(
            types.CodeLensParams(text_document=types.TextDocumentIdentifier(uri=uri))
        ),
        ANSWER_WITHIN_S,
    )
    assert lenses and len(lenses) == 3
    hover = await asyncio.wait_for(
        lsp.client.text_document_hover_async(
            types.HoverParams(
                text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(0, 1)
            )
        ),
        ANSWER_WITHIN_S,
    )
    assert hover is None  # nothing ran: an empty answer, but an answer


RANGE = {"start": {"line": 0, "character": 0}, "end": {"line": 5, "character": 0}}


@pytest.mark.parametrize(
    ("method", "params", "named"),
    [
        (
            types.TEXT_DOCUMENT_HOVER,
            {"textDocument": {"uri": "file:///x.py"}, "position": {"line": -1, "character": 0}},
            "params.position: Position.line should be in range",
        ),
        (
            types.TEXT_DOCUMENT_INLAY_HINT,
            {"textDocument": 5, "range": RANGE},
            "params.textDocument",
        ),
        (types.TEXT_DOCUMENT_CODE_LENS, {}, "params.textDocument: required field missing"),
    ],
    ids=["negative-line", "number-for-document", "missing-document"],
)
async def test_requests_with_invalid_params_get_an_error(
    lsp: LspSession, method: str, params: dict[str, Any], named: str
) -> None:
    with pytest.raises(JsonRpcException) as refused:
        await _raw_request(lsp, method, params)
    assert refused.value.code == -32602  # InvalidParams
    message = refused.value.message
    assert message.startswith(f"invalid params for {method}: ") and named in message, message
    assert "\n" not in message and "Traceback" not in message
    await _still_answers(lsp)


async def test_notifications_with_invalid_params_are_logged(lsp: LspSession) -> None:
    lsp.client.protocol._send_data(
        {"jsonrpc": "2.0", "method": types.TEXT_DOCUMENT_DID_OPEN, "params": {"textDocument": 5}}
    )

    async def logged() -> str:
        while True:  # no await between a look and the next wait: no line slips past
            for line in lsp.client.log_messages:
                if "ignored a notification" in line.message:
                    return line.message
            await lsp.client.protocol.wait_for_notification_async(types.WINDOW_LOG_MESSAGE)

    message = await asyncio.wait_for(logged(), ANSWER_WITHIN_S)
    assert "invalid params for textDocument/didOpen: params.textDocument" in message
    assert "\n" not in message
    await _still_answers(lsp)


async def test_bad_run_arguments_give_a_clear_message(lsp: LspSession) -> None:
    missing = await lsp.run((lsp.root / "missing.py").as_uri())
    assert missing["status"] == "error" and "no such file" in missing["message"]
    bad = await lsp.client.workspace_execute_command_async(
        types.ExecuteCommandParams(command="shapelens.run", arguments=["not an object"])
    )
    assert bad["status"] == "error"
    path, _ = lsp.write("broken.py", "x = (\n")
    broken = await lsp.run(lsp.open(path))
    assert broken["status"] == "error" and "syntax error" in broken["message"]
    messages = [m.message for m in lsp.client.messages]
    assert any("no such file" in m for m in messages)
    assert any("syntax error in" in m for m in messages)


async def test_settings_apply_and_invalid_ones_are_reported(lsp: LspSession) -> None:
    lsp.client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(
            settings={
                "shapelens": {"timeout": -3, "maxHintLength": 12, "findings": {"broadcast": False}}
            }
        )
    )
    path, _ = lsp.write(
        "main.py", "import numpy as np\nlong_name = np.ones(4)\nd = long_name - np.ones((4, 1))\n"
    )
    uri = lsp.open(path)
    await lsp.run(uri)
    hints = await lsp.hints(uri)
    assert hints[1] == "long_name (…"  # "long_name (4,)" cut to maxHintLength 12
    assert not [d for d in lsp.client.diagnostics.get(uri, []) if d.code == "broadcast"]
    assert any("shapelens.timeout: invalid value -3" in m.message for m in lsp.client.messages)


async def test_neovim_client(lsp_neovim: LspSession) -> None:
    path, _ = lsp_neovim.write("main.py", "import numpy as np\ngrid = np.zeros((3, 3))\n")
    uri = lsp_neovim.open(path)
    result = await lsp_neovim.run(uri)
    assert result["status"] == "ok"
    assert await lsp_neovim.hints(uri) == {1: "grid (3,3)"}
    assert lsp_neovim.refreshes >= 1  # neovim supports workspace/inlayHint/refresh


async def test_interpreter_and_environment_settings(lsp: LspSession) -> None:
    path, _ = lsp.write(
        "env.py", "import os\nprint(os.environ['SHAPELENS_TEST_VALUE'], flush=True)\n"
    )
    uri = lsp.open(path)
    lsp.client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(
            settings={"shapelens": {"extraEnv": {"SHAPELENS_TEST_VALUE": "from-settings"}}}
        )
    )
    assert (await lsp.run(uri))["status"] == "ok"
    assert any("from-settings" in m.message for m in lsp.client.log_messages)
    lsp.client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(settings={"shapelens": {"interpreter": "/no/python"}})
    )
    result = await lsp.run(uri)
    assert result == {"status": "error", "message": "Python interpreter not found: /no/python"}


async def test_debug_run_reports_where_to_attach(lsp: LspSession) -> None:
    need("debugpy")
    from dap_client import DapClient

    path, uri = lsp.write("main.py", "import numpy as np\nv = np.ones(2)\n")
    lsp.open(path)
    listening = lsp.client.protocol.wait_for_notification_async("shapelens/debugListening")
    run = asyncio.ensure_future(lsp.run(uri, debug=True))
    where = await listening
    assert where.uri == uri and where.host == "127.0.0.1"
    client = DapClient(where.host, where.port)
    try:
        client.request("initialize", {"adapterID": "debugpy"})
        attach = client.send_request("attach", {"justMyCode": True})
        client.event("initialized")
        client.request("configurationDone")
        client.response(attach)
        client.event("terminated", "exited")
    finally:
        client.close()
    result = await asyncio.wait_for(run, 60)
    assert result["status"] == "ok"
    assert await lsp.hints(uri) == {1: "v (2,)"}
    expression = await lsp.client.workspace_execute_command_async(
        types.ExecuteCommandParams(command="shapelens.inlineValueExpression", arguments=[])
    )
    assert "describe" in expression and "locals()" in expression


async def test_load_a_trace_written_elsewhere(lsp: LspSession) -> None:
    from conftest import run_cli

    path, uri = lsp.write("remote.py", "import numpy as np\ngrid = np.zeros((2, 5))\n")
    written = run_cli("--quiet", "remote.py", cwd=lsp.root)  # as if on a remote box
    assert written.trace is not None
    lsp.open(path)
    assert await lsp.hints(uri) == {}  # nothing ran here
    loaded = await lsp.client.workspace_execute_command_async(
        types.ExecuteCommandParams(
            command="shapelens.loadTrace", arguments=[{"path": str(lsp.root / ".trace.json")}]
        )
    )
    assert loaded == {"status": "ok", "lines": 2, "findings": 0}
    assert await lsp.hints(uri) == {1: "grid (2,5)"}
    bad = await lsp.client.workspace_execute_command_async(
        types.ExecuteCommandParams(command="shapelens.loadTrace", arguments=[{"path": str(path)}])
    )
    assert bad["status"] == "error" and "cannot load" in bad["message"]
