"""A minimal Debug Adapter Protocol client for tests: requests, responses and events over
a socket (Content-Length framing), as VS Code speaks to debugpy."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections import deque
from typing import Any


class DapClient:
    def __init__(self, host: str, port: int, timeout: float = 60) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.timeout = timeout
        self._seq = 0
        self._buffer = b""
        self._responses: dict[int, dict[str, Any]] = {}
        self.events: deque[dict[str, Any]] = deque()
        self._lock = threading.Lock()

    def close(self) -> None:
        self.sock.close()

    # -- wire ----------------------------------------------------------------------------
    def _send(self, message: dict[str, Any]) -> None:
        body = json.dumps(message).encode()
        self.sock.sendall(b"Content-Length: %d\r\n\r\n" % len(body) + body)

    def _receive(self) -> dict[str, Any]:
        while b"\r\n\r\n" not in self._buffer:
            self._buffer += self._recv()
        header, _, rest = self._buffer.partition(b"\r\n\r\n")
        length = next(
            int(line.split(b":")[1])
            for line in header.split(b"\r\n")
            if line.startswith(b"Content-Length")
        )
        while len(rest) < length:
            rest += self._recv()
        self._buffer = rest[length:]
        return json.loads(rest[:length])  # type: ignore[no-any-return]

    def _recv(self) -> bytes:
        data = self.sock.recv(65536)
        if not data:
            raise ConnectionError("the debug adapter closed the connection")
        return data

    def _pump_one(self) -> None:
        message = self._receive()
        if message["type"] == "response":
            self._responses[message["request_seq"]] = message
        elif message["type"] == "event":
            self.events.append(message)
        elif message["type"] == "request":  # reverse requests (runInTerminal): decline
            self._send({"type": "response", "seq": 0, "request_seq": message["seq"],
                        "success": False, "command": message["command"]})  # fmt: skip

    # -- API -------------------------------------------------------------------------------
    def send_request(self, command: str, arguments: dict[str, Any] | None = None) -> int:
        self._seq += 1
        self._send({"seq": self._seq, "type": "request", "command": command,
                    "arguments": arguments or {}})  # fmt: skip
        return self._seq

    def response(self, seq: int) -> dict[str, Any]:
        deadline = time.monotonic() + self.timeout
        while seq not in self._responses:
            if time.monotonic() > deadline:
                raise TimeoutError(f"no response to request {seq}")
            self._pump_one()
        return self._responses.pop(seq)

    def request(self, command: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
        reply = self.response(self.send_request(command, arguments))
        assert reply["success"], reply
        return reply.get("body") or {}

    def event(self, *names: str) -> dict[str, Any]:
        deadline = time.monotonic() + self.timeout
        while True:
            for event in list(self.events):
                if event["event"] in names:
                    self.events.remove(event)
                    return event
            if time.monotonic() > deadline:
                raise TimeoutError(f"no {names} event")
            self._pump_one()
