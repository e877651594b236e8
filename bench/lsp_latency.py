"""Latency from `shapelens.run` to inlay hints, through the real language server over stdio.

The first run of a server is cold (a new interpreter imports torch); it also starts the warm
runner, a fork server with torch imported, from which later runs fork a fresh child.
Reported: the cold first run, and the median of the later (warm) runs.
Usage: python bench/lsp_latency.py [--repeat N] [--out FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from lsprotocol import types
from pygls.lsp.client import LanguageClient
from report import emit  # bench/ is on sys.path: these scripts run as files

SEED_TRAINING = """import torch

model = torch.nn.Linear(2, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.tensor([[0.0, 0.0], [0.0, 1.0], [1.0, 0.0], [1.0, 1.0]])
y = torch.tensor([3.0, 5.0, 4.0, 6.0])
for step in range(10):
    optimizer.zero_grad()
    pred = model(x)
    squared_diff = (y - pred) ** 2
    loss = squared_diff.mean()
    loss.backward()
    optimizer.step()
"""
SCRIPTS = {
    "numpy script": "import numpy as np\na = np.ones((4, 2))\nb = a * 2\n",
    "torch script": "import torch\nx = torch.ones(4, 2)\ny = x @ x.T\n",
    "the seed's 10-step training loop": SEED_TRAINING,
}
FORK_SERVER_READY_S = 10.0  # time for the fork server to import torch on a busy 2-core machine
WARM_TARGET_S = 0.3  # issue 14: a warm run -> hints
COLD_TARGET_S = 0.5  # issue 14: a cold run -> hints, over the script's own untraced time


async def measure(python: str, source: str, folder: Path, repeat: int) -> list[float]:
    client = LanguageClient("shapelens-bench", "1")
    for method in (types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS, "shapelens/traceUpdated"):
        client.feature(method)(lambda *_: None)  # received, not needed here
    await client.start_io(python, "-m", "shapelens", "lsp")
    await client.initialize_async(
        types.InitializeParams(capabilities=types.ClientCapabilities(), root_uri=folder.as_uri())
    )
    client.initialized(types.InitializedParams())
    script = folder / "tiny.py"
    script.write_text(source)
    uri = script.as_uri()
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(
                uri=uri, language_id="python", version=1, text=source
            )
        )
    )
    timings = []
    for index in range(repeat + 1):  # the first is cold, the others warm
        if index == 1:  # the fork server started with the cold run: let it import torch
            await asyncio.sleep(FORK_SERVER_READY_S)
        start = time.perf_counter()
        await client.workspace_execute_command_async(
            types.ExecuteCommandParams(command="shapelens.run", arguments=[{"uri": uri}])
        )
        hints = await client.text_document_inlay_hint_async(
            types.InlayHintParams(
                text_document=types.TextDocumentIdentifier(uri=uri),
                range=types.Range(types.Position(0, 0), types.Position(10, 0)),
            )
        )
        timings.append(time.perf_counter() - start)
        assert hints, "the run produced no hints"
    await client.shutdown_async(None)
    client.exit(None)
    await client.stop()
    return timings


def _untraced_wall(python: str, source: str, folder: Path, repeat: int) -> float:
    """Median wall time of ``python script.py`` (a fresh interpreter, like a cold run)."""
    script = folder / "untraced.py"
    script.write_text(source)
    timings = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run([python, str(script)], check=True, capture_output=True)
        timings.append(time.perf_counter() - start)
    return statistics.median(timings)


def _version(python: str) -> str:
    done = subprocess.run([python, "--version"], capture_output=True, text=True, check=True)
    return done.stdout.strip()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--python", default=sys.executable, help="interpreter of the server")
    options = parser.parse_args()
    rows = [
        "| script | untraced (`python script.py`, s) | cold (first run, s) | cold − untraced"
        f" (target ≤ {COLD_TARGET_S}) | warm (median of later runs, s; target ≤ {WARM_TARGET_S}) |",
        "|---|---:|---:|---:|---:|",
    ]
    with tempfile.TemporaryDirectory() as tmp:
        for name, source in SCRIPTS.items():
            untraced = _untraced_wall(options.python, source, Path(tmp), options.repeat)
            timings = asyncio.run(measure(options.python, source, Path(tmp), options.repeat))
            warm = statistics.median(timings[-options.repeat :])
            rows.append(
                f"| {name} | {untraced:.2f} | {timings[0]:.2f} | {timings[0] - untraced:+.2f} |"
                f" {warm:.3f} |"
            )
    emit(
        [
            f"Language server latency ({_version(options.python)}): `shapelens.run` until"
            " inlay hints arrive. Cold: the server's first run (a new interpreter imports"
            " torch; it also starts the fork server). Warm: later runs, forked from the fork"
            " server.",
            "",
            *rows,
        ],
        options.out,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
