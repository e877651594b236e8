"""Latency from `shapelens.run` to inlay hints, through the real language server over stdio.

The first run of a server is cold (a new interpreter imports torch); it also starts the warm
runner, a fork server with torch imported, from which later runs fork a fresh child.
Reported: the cold first run and ``python script.py`` untraced, each the median of N rounds
that alternate them (a new server each round: one cold sample per server; on a busy machine a
single sample of a 6 s script is off by half a second either way), and the median of the
warm runs of the first round's server.
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


async def measure(python: str, source: str, folder: Path, warm_runs: int) -> list[float]:
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
    for index in range(warm_runs + 1):  # the first is cold, the others warm
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


def _untraced_wall(python: str, source: str, folder: Path) -> float:
    """Wall time of ``python script.py`` (a fresh interpreter, like a cold run)."""
    script = folder / "untraced.py"
    script.write_text(source)
    start = time.perf_counter()
    subprocess.run([python, str(script)], check=True, capture_output=True)
    return time.perf_counter() - start


def _version(python: str) -> str:
    done = subprocess.run([python, "--version"], capture_output=True, text=True, check=True)
    return done.stdout.strip()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--python", default=sys.executable, help="interpreter of the server")
    options = parser.parse_args()
    rows = [
        "| script | untraced (`python script.py`, s) | cold (first run, s) | cold − untraced"
        f" (median of the rounds' differences, their range; target ≤ {COLD_TARGET_S}) |"
        f" warm (median of later runs, s; target ≤ {WARM_TARGET_S}) |",
        "|---|---:|---:|---:|---:|",
    ]
    with tempfile.TemporaryDirectory() as tmp:
        for name, source in SCRIPTS.items():
            untraced, cold, warm = [], [], []
            for round_ in range(options.repeat):  # alternating, so drifts hit both alike
                untraced.append(_untraced_wall(options.python, source, Path(tmp)))
                warm_runs = options.repeat if round_ == 0 else 0
                timings = asyncio.run(measure(options.python, source, Path(tmp), warm_runs))
                cold.append(timings[0])
                warm.extend(timings[1:])
            added = [c - u for c, u in zip(cold, untraced, strict=True)]
            rows.append(
                f"| {name} | {statistics.median(untraced):.2f} | {statistics.median(cold):.2f} |"
                f" {statistics.median(added):+.2f} ({min(added):+.2f}…{max(added):+.2f}) |"
                f" {statistics.median(warm):.3f} |"
            )
    emit(
        [
            f"Language server latency ({_version(options.python)}): `shapelens.run` until"
            " inlay hints arrive. Cold: the server's first run (a new interpreter imports"
            " torch; it also starts the fork server). Warm: later runs, forked from the fork"
            f" server. Medians of {options.repeat} alternating rounds.",
            "",
            *rows,
        ],
        options.out,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
