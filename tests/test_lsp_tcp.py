"""``shapelens lsp --tcp`` (loopback, token), ``--socket`` (0600) and the ``--connect`` bridge.

A peer must send ``SHAPELENS-TOKEN <token>`` first: on a shared machine any local user can
connect to a loopback port, and a connected peer runs code as the server's user."""

from __future__ import annotations

import json
import os
import queue
import re
import socket
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types
from pytest_lsp import client_capabilities, make_test_lsp_client

from conftest import LspSession

SHAPELENS = [sys.executable, "-m", "shapelens"]
DEADLINE_S = 60.0
# Appends a line each time it runs: the count says how many peers got to run it.
MARKER_SCRIPT = """
from pathlib import Path
with open(Path(__file__).with_name("ran.txt"), "a") as marker:
    marker.write("ran\\n")
"""


@dataclass
class Server:
    process: subprocess.Popen[bytes]
    stderr: queue.Queue[str] = field(default_factory=queue.Queue)

    def wait_for_line(self, pattern: str) -> re.Match[str]:
        """The first stderr line matching ``pattern`` (the server prints it once listening)."""
        deadline = time.monotonic() + DEADLINE_S
        while True:
            try:
                line = self.stderr.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"the server never printed {pattern!r}") from None
            found = re.search(pattern, line)
            if found:
                return found

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(DEADLINE_S)


def _start(*args: str, env: dict[str, str] | None = None) -> Server:
    process = subprocess.Popen(
        [*SHAPELENS, "lsp", *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env={**os.environ, **(env or {})},
    )
    server = Server(process)

    def drain() -> None:  # read stderr all along, so the server never blocks on it
        assert process.stderr is not None
        for raw in process.stderr:
            server.stderr.put(raw.decode(errors="replace"))

    threading.Thread(target=drain, daemon=True).start()
    return server


@dataclass
class Tcp:
    server: Server
    port: int
    token_file: Path

    @property
    def token(self) -> bytes:
        return self.token_file.read_bytes().strip()


def _start_tcp(*args: str, env: dict[str, str] | None = None) -> Tcp:
    server = _start("--tcp", "--port", "0", *args, env=env)
    found = server.wait_for_line(r"listening on 127\.0\.0\.1:(\d+); token file: (.+)$")
    return Tcp(server, int(found[1]), Path(found[2].strip()))


@pytest.fixture
def tcp(tmp_path: Path) -> Iterator[Tcp]:
    started = _start_tcp("--token-file", str(tmp_path / "lsp.token"))
    yield started
    started.server.stop()


def _frame(message: dict[str, Any]) -> bytes:
    body = json.dumps({"jsonrpc": "2.0", **message}).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


INITIALIZE = _frame(
    {"id": 1, "method": "initialize",
     "params": {"processId": None, "rootUri": None, "capabilities": {}}}
)  # fmt: skip
INITIALIZED = _frame({"method": "initialized", "params": {}})


def _run_request(script: Path) -> bytes:
    return _frame(
        {"id": 2, "method": "workspace/executeCommand",
         "params": {"command": "shapelens.run", "arguments": [{"uri": script.as_uri()}]}}
    )  # fmt: skip


class Peer:
    """A raw client: whatever it sends first, then LSP frames."""

    def __init__(self, conn: socket.socket, first: bytes) -> None:
        self.conn = conn
        self.conn.settimeout(DEADLINE_S)
        self.buffer = b""
        conn.sendall(first)

    def send(self, data: bytes) -> None:
        self.conn.sendall(data)

    def reply(self, request_id: int) -> dict[str, Any]:
        """The response to ``request_id``, skipping the server's notifications."""
        while True:
            while b"\r\n\r\n" not in self.buffer:
                self._receive()
            header, _, self.buffer = self.buffer.partition(b"\r\n\r\n")
            length = int(re.search(rb"Content-Length: (\d+)", header)[1])  # type: ignore[index]
            while len(self.buffer) < length:
                self._receive()
            message = json.loads(self.buffer[:length])
            self.buffer = self.buffer[length:]
            if message.get("id") == request_id and "method" not in message:
                return message  # type: ignore[no-any-return]

    def until_closed(self) -> bytes:
        while data := self.conn.recv(1 << 16):
            self.buffer += data
        return self.buffer

    def _receive(self) -> None:
        data = self.conn.recv(1 << 16)
        assert data, f"the server closed the connection; it sent {self.buffer!r}"
        self.buffer += data


def _tcp_peer(tcp: Tcp, first: bytes) -> Peer:
    return Peer(socket.create_connection(("127.0.0.1", tcp.port), timeout=DEADLINE_S), first)


def _end_session(peer: Peer, server: Server) -> None:
    """shutdown + exit, so the server ends its warm runner and exits by itself."""
    peer.send(_frame({"id": 99, "method": "shutdown"}))
    assert "error" not in peer.reply(99)
    peer.send(_frame({"method": "exit"}))
    assert server.process.wait(DEADLINE_S) == 0


def test_refuses_a_non_loopback_host() -> None:
    done = subprocess.run(
        [*SHAPELENS, "lsp", "--tcp", "--host", "0.0.0.0"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 2 and "loopback" in done.stderr


def test_a_peer_with_the_token_gets_initialize_answered(tcp: Tcp) -> None:
    peer = _tcp_peer(tcp, b"SHAPELENS-TOKEN " + tcp.token + b"\r\n" + INITIALIZE)
    with peer.conn:
        reply = peer.reply(1)
    assert reply["result"]["serverInfo"]["name"] == "shapelens"


@pytest.mark.parametrize("from_environment", [False, True])
def test_the_token_file_is_private(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, from_environment: bool
) -> None:
    """The default place (no --token-file): a 0700 folder of ours holding a 0600 file."""
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    env = {"TMPDIR": str(tmp_path)}
    if from_environment:
        env["SHAPELENS_LSP_TOKEN"] = "a-token-from-the-environment"
    started = _start_tcp(env=env)
    try:
        assert started.token_file.parent.parent == tmp_path
        assert stat.S_IMODE(started.token_file.stat().st_mode) == 0o600
        assert stat.S_IMODE(started.token_file.parent.stat().st_mode) == 0o700
        if from_environment:
            assert started.token == b"a-token-from-the-environment"
        else:
            assert len(started.token) >= 32  # secrets.token_urlsafe(32)
        peer = _tcp_peer(started, b"SHAPELENS-TOKEN " + started.token + b"\r\n" + INITIALIZE)
        with peer.conn:
            assert peer.reply(1)["result"]["serverInfo"]["name"] == "shapelens"
    finally:
        started.server.stop()


def test_peers_without_the_token_are_refused_and_run_nothing(tcp: Tcp, tmp_path: Path) -> None:
    script = tmp_path / "marker.py"
    script.write_text(MARKER_SCRIPT)
    token = tcp.token
    attempts = [
        b"",  # a plain LSP client
        b"SHAPELENS-TOKEN wrong\r\n",
        b"SHAPELENS-TOKEN " + token[:-1] + b"\r\n",
        b"SHAPELENS-TOKEN " + token + b"x\r\n",
        token + b"\r\n",
    ]
    for first in attempts:
        peer = _tcp_peer(tcp, first)
        with peer.conn:
            peer.send(INITIALIZE + INITIALIZED + _run_request(script))
            answer = peer.until_closed()
        assert answer.startswith(b"SHAPELENS-ERROR missing or wrong token"), (first, answer)
        assert answer.count(b"\n") == 1 and b"Content-Length" not in answer
    # The server still listens, and runs the script for a peer with the token: once.
    peer = _tcp_peer(tcp, b"SHAPELENS-TOKEN " + token + b"\r\n")
    with peer.conn:
        peer.send(INITIALIZE)
        assert peer.reply(1)["result"]["serverInfo"]["name"] == "shapelens"
        peer.send(INITIALIZED + _run_request(script))
        assert peer.reply(2)["result"]["status"] == "ok"
        assert (tmp_path / "ran.txt").read_text() == "ran\n"
        _end_session(peer, tcp.server)
    assert not tcp.token_file.exists()  # removed on exit


def test_a_second_client_is_refused_while_one_is_connected(tcp: Tcp) -> None:
    first = _tcp_peer(tcp, b"SHAPELENS-TOKEN " + tcp.token + b"\r\n" + INITIALIZE)
    with first.conn:
        assert "result" in first.reply(1)
        second = _tcp_peer(tcp, b"SHAPELENS-TOKEN " + tcp.token + b"\r\n")
        with second.conn:
            assert second.until_closed().startswith(b"SHAPELENS-ERROR another client")


async def test_the_bridge_lets_a_stdio_client_run_code(tcp: Tcp, tmp_path: Path) -> None:
    client = make_test_lsp_client()
    await client.start_io(
        *SHAPELENS, "lsp", "--connect", f"127.0.0.1:{tcp.port}", "--token-file", str(tcp.token_file)
    )
    try:
        await client.initialize_session(
            types.InitializeParams(
                capabilities=client_capabilities("visual-studio-code"), root_uri=tmp_path.as_uri()
            )
        )
        session = LspSession(client, tmp_path)
        path, uri = session.write("main.py", "import numpy as np\nv = np.ones((2, 3))\n")
        session.open(path)
        assert (await session.run(uri))["status"] == "ok"
        assert (await session.hints(uri))[1] == "v (2,3)"
        await client.shutdown_session()
    finally:
        await client.stop()
    assert tcp.server.process.wait(DEADLINE_S) == 0


def test_the_bridge_reports_a_refusal(tcp: Tcp) -> None:
    done = subprocess.run(
        [*SHAPELENS, "lsp", "--connect", str(tcp.port)],
        input=INITIALIZE,
        capture_output=True,
        timeout=DEADLINE_S,
        env={**os.environ, "SHAPELENS_LSP_TOKEN": "not-the-token-at-all"},
    )
    assert done.returncode == 1 and done.stdout == b""
    assert b"refused the connection: missing or wrong token" in done.stderr


def test_a_unix_socket_is_private_and_answers(tmp_path: Path) -> None:
    path = tmp_path / "lsp.sock"
    server = _start("--socket", str(path))
    try:
        server.wait_for_line(r"listening on ")
        assert stat.S_ISSOCK(path.stat().st_mode)
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        conn = socket.socket(socket.AF_UNIX)
        conn.connect(str(path))
        with conn:
            reply = Peer(conn, INITIALIZE).reply(1)
        assert reply["result"]["serverInfo"]["name"] == "shapelens"
    finally:
        server.stop()
