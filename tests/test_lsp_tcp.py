"""``shapelens lsp --tcp`` listens on loopback only."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _connect(port: int, server: subprocess.Popen[bytes]) -> socket.socket:
    """Connect once the server listens (readiness poll with a deadline)."""
    deadline = time.monotonic() + 30
    while True:
        try:
            return socket.create_connection(("127.0.0.1", port), timeout=30)
        except ConnectionRefusedError:
            if time.monotonic() > deadline or server.poll() is not None:
                raise
            time.sleep(0.05)


def test_refuses_a_non_loopback_host() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "shapelens", "lsp", "--tcp", "--host", "0.0.0.0"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 2 and "loopback" in done.stderr


def test_answers_initialize_over_tcp() -> None:
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "shapelens", "lsp", "--tcp", "--port", str(port)],
    )
    try:
        with _connect(port, server) as conn:
            body = json.dumps(
                {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                 "params": {"processId": None, "rootUri": None, "capabilities": {}}}
            ).encode()  # fmt: skip
            conn.sendall(b"Content-Length: %d\r\n\r\n" % len(body) + body)
            data = b""
            while b"\r\n\r\n" not in data:
                data += conn.recv(4096)
            header, _, rest = data.partition(b"\r\n\r\n")
            fields = dict(line.split(b": ", 1) for line in header.split(b"\r\n"))
            length = int(fields[b"Content-Length"])
            while len(rest) < length:
                rest += conn.recv(4096)
            reply = json.loads(rest[:length])
        assert reply["id"] == 1 and reply["result"]["serverInfo"]["name"] == "shapelens"
    finally:
        server.kill()
        server.wait()
