"""Scale: memory and trace size stay flat as iterations grow; big files stay fast.

1. A tight loop at 10^4 and 10^7 iterations under `shapelens run`: peak RSS of the traced
   processes (getrusage of waited-for children) and trace size.
2. A generated 2,000-line module: time, peak RSS, trace size.
3. The language server answering `textDocument/inlayHint` for a traced 5,000-line file:
   the first request after the run, and the first after an edit (lines re-matched).
Usage: python bench/scale.py [--python PY] [--out FILE] [--quick]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from report import emit  # bench/ is on sys.path: these scripts run as files

LOOP = """
import numpy as np
acc = np.zeros(4)
for step in range({n}):
    delta = np.ones(4)
    acc = acc + delta
"""


def _traced_run(python: str, script: Path, extra: list[str]) -> tuple[float, float, int]:
    """(wall s, peak RSS MiB, trace bytes) of `shapelens run` on script."""
    trace = script.with_suffix(".json")
    probe = (
        "import resource, subprocess, sys, time\n"
        "start = time.perf_counter()\n"
        "subprocess.run(sys.argv[1:], check=True)\n"
        "print(time.perf_counter() - start, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
    )
    command = [
        python,
        "-m",
        "shapelens",
        "run",
        "--quiet",
        *extra,
        "--json",
        str(trace),
        str(script),
    ]
    done = subprocess.run(
        [sys.executable, "-c", probe, *command],
        capture_output=True,
        text=True,
        cwd=script.parent,
        check=True,
    )
    wall, rss_kib = done.stdout.split()[-2:]
    return float(wall), int(rss_kib) / 1024, trace.stat().st_size


def _module(lines: int) -> str:
    body = ["import numpy as np", "", "def block(seed):"]
    body += [f"    v{i} = np.full(({i % 7 + 1},), seed + {i})" for i in range((lines - 8) // 2)]
    body += ["    return v0", "", "for seed in range(3):", "    base = block(seed)"]
    body += [f"    w{i} = base * {i}" for i in range(lines - len(body))]
    return "\n".join(body) + "\n"


class _RawClient:
    """A bare JSON-RPC client on the server's stdio: times what the server takes to answer,
    without a client library's decoding of thousands of hints on our side."""

    def __init__(self, python: str, folder: Path) -> None:
        self.process = subprocess.Popen(
            [python, "-m", "shapelens", "lsp"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            cwd=folder,
        )
        self.next_id = 0

    def send(self, method: str, params: object, request: bool = True) -> int | None:
        message: dict[str, object] = {"jsonrpc": "2.0", "method": method, "params": params}
        if request:
            self.next_id += 1
            message["id"] = self.next_id
        body = json.dumps(message).encode()
        assert self.process.stdin is not None
        self.process.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.process.stdin.flush()
        return self.next_id if request else None

    def wait(self, request_id: int) -> dict[str, object]:
        assert self.process.stdout is not None
        while True:
            length = 0
            while line := self.process.stdout.readline().strip():
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            message = json.loads(self.process.stdout.read(length))
            if message.get("id") == request_id and "method" not in message:
                return message  # type: ignore[no-any-return]

    def call(self, method: str, params: object) -> dict[str, object]:
        request_id = self.send(method, params)
        assert request_id is not None
        return self.wait(request_id)

    def close(self) -> None:
        self.call("shutdown", None)
        self.send("exit", None, request=False)
        self.process.wait(timeout=30)


def _inlay_latency(python: str, folder: Path, lines: int) -> dict[str, float]:
    script = folder / "big.py"
    script.write_text(
        "import numpy as np\n"
        + "".join(f"a{i} = np.zeros({i % 5 + 1})\n" for i in range(lines - 1))
    )
    uri = script.as_uri()
    client = _RawClient(python, folder)
    client.call("initialize", {"processId": None, "rootUri": folder.as_uri(), "capabilities": {}})
    client.send("initialized", {}, request=False)
    client.send(
        "textDocument/didOpen",
        {
            "textDocument": {
                "uri": uri,
                "languageId": "python",
                "version": 1,
                "text": script.read_text(),
            }
        },
        request=False,
    )
    client.call(
        "workspace/executeCommand", {"command": "shapelens.run", "arguments": [{"uri": uri}]}
    )

    def timed(first: int, last: int) -> float:
        start = time.perf_counter()
        reply = client.call(
            "textDocument/inlayHint",
            {"textDocument": {"uri": uri}, "range": {"start": {"line": first, "character": 0},
                                                   "end": {"line": last, "character": 0}}},
        )  # fmt: skip
        elapsed = time.perf_counter() - start
        assert isinstance(reply.get("result"), list) and reply["result"], reply
        return elapsed

    results = {"viewport (60 lines)": timed(2400, 2460), "whole file": timed(0, lines + 1)}
    client.send(
        "textDocument/didChange",
        {"textDocument": {"uri": uri, "version": 2},
         "contentChanges": [{"range": {"start": {"line": 1, "character": 0},
                                       "end": {"line": 1, "character": 0}}, "text": "# edited\n"}]},
        request=False,
    )  # fmt: skip
    results["viewport after an edit (lines re-matched)"] = timed(2400, 2460)
    results["whole file after the edit"] = timed(0, lines + 1)
    client.close()
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--quick", action="store_true", help="10^5 instead of 10^7 iterations")
    options = parser.parse_args()
    big = 10**5 if options.quick else 10**7
    rows = ["| run | wall (s) | peak RSS (MiB) | trace (bytes) |", "|---|---:|---:|---:|"]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for n in (10**4, big):
            script = folder / f"loop_{n}.py"
            script.write_text(LOOP.format(n=n))
            wall, rss, size = _traced_run(options.python, script, [])
            rows.append(f"| loop, {n:,} iterations | {wall:.1f} | {rss:.0f} | {size:,} |")
        module = folder / "generated.py"
        module.write_text(_module(2000))
        wall, rss, size = _traced_run(options.python, module, [])
        rows.append(f"| generated 2,000-line module | {wall:.1f} | {rss:.0f} | {size:,} |")
        latency = _inlay_latency(options.python, folder, 5000)
    version = subprocess.run(
        [options.python, "--version"], capture_output=True, text=True
    ).stdout.strip()
    emit(
        [
            f"Scale ({version}): memory and trace size do not grow with iterations.",
            "",
            *rows,
            "",
            "| language server, 5,000-line traced file: textDocument/inlayHint | ms |",
            "|---|---:|",
            *(f"| {name} | {seconds * 1000:.1f} |" for name, seconds in latency.items()),
        ],
        options.out,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
