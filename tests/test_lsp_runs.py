"""Runs through the language server: origins, progress and cancel, crashes, other files."""

from __future__ import annotations

import asyncio
import shutil
import time

import pytest
from lsprotocol import types
from test_tracer_faults import SCRIPT as FAULTED_SCRIPT
from test_tracer_faults import SITE as PLANTED_FAULT

from conftest import EXAMPLES, TRACE_UPDATED, LspSession, line_of, need, suite_fork_server_pid

LOOP = """
import numpy as np
step = 0
while True:
    grad = np.full((2, 2), step)
    step += 1
    if step == 1000:
        print("looping", flush=True)
"""


async def test_example_1_related_information(lsp: LspSession) -> None:
    need("torch")
    script = lsp.root / "seed_device_mask.py"
    shutil.copy(EXAMPLES / "seed_device_mask.py", script)
    uri = lsp.open(script)
    result = await lsp.run(uri)
    assert result["status"] == "exception" and result["exitCode"] == 1
    diagnostics = {d.code: d for d in lsp.client.diagnostics[uri]}
    failing = line_of(script, "y.masked_scatter_") - 1
    exception = diagnostics["exception"]
    assert exception.range.start.line == failing
    assert exception.message.startswith("RuntimeError: Mask must be bool or uint8")
    assert "mask (6,) i64 meta" in exception.message  # the tensors the line names
    dtype = diagnostics["dtype_mismatch"]
    assert dtype.severity == types.DiagnosticSeverity.Error
    related = dtype.related_information or []
    assert related[0].location.uri == uri
    assert related[0].location.range.start.line == line_of(script, "mask = torch.tensor") - 1
    device = diagnostics["device_mismatch"]
    assert (device.related_information or [])[0].location.range.start.line == (
        line_of(script, "y = torch.zeros(6)") - 1
    )
    assert any("RuntimeError at line" in m.message for m in lsp.client.messages)


async def test_progress_and_cancel_keep_partial_results(lsp: LspSession) -> None:
    path, uri = lsp.write("loop.py", LOOP)
    lsp.open(path)
    began = lsp.client.protocol.wait_for_notification_async(types.PROGRESS)
    looping = lsp.client.protocol.wait_for_notification_async(types.WINDOW_LOG_MESSAGE)
    run = asyncio.ensure_future(lsp.run(uri))
    progress = await began
    token = progress.token
    assert "looping" in (await looping).message  # the script's output is forwarded live
    live = await lsp.client.protocol.wait_for_notification_async(TRACE_UPDATED)
    assert any(entry.label.startswith("grad (2,2)") for entry in live.lines)  # while running
    first = lsp.client.progress_reports[token][0]
    assert isinstance(first, types.WorkDoneProgressBegin) and first.cancellable
    lsp.client.window_work_done_progress_cancel(types.WorkDoneProgressCancelParams(token=token))
    result = await asyncio.wait_for(run, 30)
    assert result["status"] == "cancelled"
    assert isinstance(lsp.client.progress_reports[token][-1], types.WorkDoneProgressEnd)
    hints = await lsp.hints(uri)
    assert hints[line_of(path, "grad =") - 1] == "grad (2,2)"  # int64: this run's usual
    assert hints[line_of(path, "while True:") - 1].startswith("×")  # the loop's count so far
    # the server is healthy: a new run works
    path2, uri2 = lsp.write("ok.py", "import numpy as np\nv = np.ones(3)\n")
    lsp.open(path2)
    assert (await lsp.run(uri2))["status"] == "ok"


async def test_cancel_command_and_second_run_replaces_first(lsp: LspSession) -> None:
    path, uri = lsp.write("loop.py", LOOP)
    lsp.open(path)
    began = lsp.client.protocol.wait_for_notification_async(types.PROGRESS)
    first = asyncio.ensure_future(lsp.run(uri))
    await began
    began_again = lsp.client.protocol.wait_for_notification_async(types.PROGRESS)
    second = asyncio.ensure_future(lsp.run(uri))
    assert (await asyncio.wait_for(first, 30))["status"] == "cancelled"
    await began_again
    cancelled = await lsp.client.workspace_execute_command_async(
        types.ExecuteCommandParams(command="shapelens.cancel", arguments=[{"uri": uri}])
    )
    assert cancelled == {"cancelled": 1}
    assert (await asyncio.wait_for(second, 30))["status"] == "cancelled"


@pytest.mark.parametrize(
    ("ending", "status", "message"),
    [
        # a program that ran a while (past a background flush), then died natively
        (
            "import time, ctypes; time.sleep(0.6); ctypes.string_at(0)",
            "crashed",
            "crashed (killed by SIGSEGV) at line 3",
        ),
        ("import os; os._exit(4)", "exit", "exited with status 4"),
        ("import sys; sys.stdout.write('x' * 50_000_000)", "ok", None),
    ],
)
async def test_user_code_cannot_hurt_the_server(
    lsp: LspSession, ending: str, status: str, message: str | None
) -> None:
    path, uri = lsp.write("bad.py", f"import numpy as np\nkept = np.ones(2)\n{ending}\n")
    lsp.open(path)
    result = await lsp.run(uri)
    assert result["status"] == status
    if message is not None:
        assert any(message in m.message for m in lsp.client.messages), lsp.client.messages
    assert (await lsp.hints(uri))[1] == "kept (2,)"
    forwarded = sum(len(m.message) for m in lsp.client.log_messages)
    assert forwarded < 2 * (1 << 20)  # a huge print is capped, not streamed into the editor


async def test_results_for_imported_files_and_reopen(lsp: LspSession) -> None:
    helper, helper_uri = lsp.write(
        "helper.py",
        "import numpy as np\ndef make():\n    made = np.zeros((5, 1))\n    return made\n",
    )
    main, main_uri = lsp.write("main.py", "import helper\nresult = helper.make()\n")
    lsp.open(main)
    await lsp.run(main_uri)
    updated = lsp.client.protocol.wait_for_notification_async(TRACE_UPDATED)
    lsp.open(helper)
    update = await updated
    assert update.uri == helper_uri
    assert (await lsp.hints(helper_uri))[2] == "made (5,1)"
    # closing and reopening keeps the last results
    lsp.client.text_document_did_close(
        types.DidCloseTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=main_uri))
    )
    lsp.open(main, version=2)
    assert (await lsp.hints(main_uri))[1] == "result (5,1)"
    cleared = await lsp.client.workspace_execute_command_async(
        types.ExecuteCommandParams(command="shapelens.clear", arguments=[])
    )
    assert cleared == {"cleared": 2}
    assert await lsp.hints(main_uri) == {}
    assert not lsp.client.diagnostics[main_uri]


async def test_warm_runner_forks_fresh_children(lsp_cold: LspSession) -> None:
    lsp = lsp_cold
    helper, _ = lsp.write("helper.py", "import numpy as np\nSIZE = 3\n")
    path, uri = lsp.write(
        "main.py",
        "import os\nimport numpy as np\nimport helper\n"
        "print('parent', os.getppid(), flush=True)\nv = np.ones(helper.SIZE)\n",
    )
    lsp.open(path)

    async def run_and_parent() -> int:
        before = len(lsp.client.log_messages)
        assert (await lsp.run(uri))["status"] == "ok"
        lines = [m.message for m in lsp.client.log_messages[before:] if "parent" in m.message]
        return int(lines[-1].split()[-1])

    cold_parent = await run_and_parent()  # the first run starts cold, and starts the fork server
    # Later runs fork from it once it has imported torch (seconds; more on a loaded machine).
    deadline = time.monotonic() + 120
    while await run_and_parent() == cold_parent:
        if time.monotonic() > deadline:
            pytest.fail("no run was forked from the warm runner within 120 s")
        await asyncio.sleep(0.2)
    # user modules are imported fresh in each forked child, never stale
    helper.write_text("import numpy as np\nSIZE = 5\n")
    assert await run_and_parent() != cold_parent
    assert (await lsp.hints(uri))[4] == "v (5,)"


async def test_a_server_started_with_a_fork_server_forks_every_run_from_it(
    lsp: LspSession,
) -> None:
    path, uri = lsp.write("main.py", "import os\nprint('parent', os.getppid(), flush=True)\n")
    lsp.open(path)
    assert (await lsp.run(uri))["status"] == "ok"  # the first run too: no cold start
    [line] = [m.message for m in lsp.client.log_messages if m.message.startswith("parent")]
    assert int(line.split()[-1]) == suite_fork_server_pid()


LAUNCHED = """
import argparse
import os
import numpy as np

parser = argparse.ArgumentParser()
parser.add_argument("--rows", type=int)
args = parser.parse_args()
width = int(os.environ["WIDTH"])
batch = np.zeros((args.rows, width))
"""


async def test_a_launch_configuration_runs_with_its_args_env_and_module(lsp: LspSession) -> None:
    """What a `shapelens` launch configuration sends (Ctrl+F5, Run File with its arguments):
    args and env reach the program, as a file or as a module."""
    path, uri = lsp.write("pkg/train.py", LAUNCHED)
    (lsp.root / "pkg" / "__init__.py").write_text("")
    lsp.open(path)
    result = await lsp.run(uri, args=["--rows", "3"], env={"WIDTH": "7"})
    assert result["status"] == "ok", result
    assert (await lsp.hints(uri))[line_of(path, "batch =") - 1] == "batch (3,7)"
    result = await lsp.run(
        uri, module="pkg.train", args=["--rows", "5"], env={"WIDTH": "2"}, cwd=str(lsp.root)
    )
    assert result["status"] == "ok", result
    assert (await lsp.hints(uri))[line_of(path, "batch =") - 1] == "batch (5,2)"
    for bad, message in (({"env": {"WIDTH": 7}}, "env must be"), ({"module": ""}, "module must")):
        result = await lsp.run(uri, **bad)
        assert result["status"] == "error" and message in result["message"], result


BAD_ARGUMENTS = [
    ({"nprocPerNode": 0}, "nprocPerNode must be a positive integer or null, not 0"),
    ({"fake": "yes"}, "fake must be true or false, not 'yes'"),
    ({"args": "--epochs 1"}, "args must be a list of strings"),
    ({"env": {"A": 1}}, "env must be an object mapping names to strings"),
    ({"nproc": 2}, "unknown argument nproc (known: args, clientAttaches, collectiveTimeout, cwd"),
    ({"uri": None}, "uri must be a non-empty string or null, not None"),
]


async def test_a_bad_run_argument_gets_one_clear_error(lsp: LspSession) -> None:
    """The run command's arguments are read against the settings schema: the first one that
    does not fit is said in one line, nothing runs, and the server goes on."""
    path, uri = lsp.write("ok.py", "x = 1\n")
    lsp.open(path)
    for arguments, said in BAD_ARGUMENTS:
        result = await lsp.client.workspace_execute_command_async(
            types.ExecuteCommandParams(
                command="shapelens.run", arguments=[{"uri": uri, **arguments}]
            )
        )
        assert result["status"] == "error", result
        message = result["message"]
        assert message.startswith("shapelens.run: ") and said in message, result
        assert "\n" not in message and "Traceback" not in message
    for arguments in ([], ["file:///x.py"], [{}]):
        result = await lsp.client.workspace_execute_command_async(
            types.ExecuteCommandParams(command="shapelens.run", arguments=arguments)
        )
        assert result["status"] == "error" and result["message"].startswith("shapelens.run")
    assert not lsp.client.diagnostics.get(uri)  # nothing ran
    assert (await lsp.run(uri))["status"] == "ok"  # a good request is served


async def test_the_editor_is_told_when_tracing_stopped_early(lsp: LspSession) -> None:
    """An error of ShapeLens's own inside a tracing callback (planted by a sitecustomize, as
    in test_tracer_faults): the program runs on, and a warning says where tracing stopped."""
    site = lsp.root / "planted"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(PLANTED_FAULT)
    path, uri = lsp.write("stops.py", FAULTED_SCRIPT)
    lsp.open(path)
    result = await lsp.run(uri, env={"PYTHONPATH": str(site)})
    assert (result["status"], result["exitCode"]) == ("ok", 0), result
    warnings = [m.message for m in lsp.client.messages if m.type == types.MessageType.Warning]
    told = [w for w in warnings if "tracing stopped early" in w]
    assert len(told) == 1, warnings
    assert told[0].startswith("ShapeLens: stops.py: tracing stopped early")
    assert "from there: RuntimeError: planted in a test (shapelens/" in told[0]
    assert f", tracing stops.py:{line_of(path, 'return x')}. This is a ShapeLens bug" in told[0]
