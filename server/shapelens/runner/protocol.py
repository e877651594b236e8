"""Framing of the child→parent channel: 4-byte big-endian length, then a JSON object.

The objects are the messages of :mod:`shapelens.trace.messages` (``"t"`` is their kind).
"""

from __future__ import annotations

import json
import os
import struct
import threading
from collections.abc import Iterator, Mapping
from typing import Any

_HEADER = struct.Struct(">I")
MAX_FRAME = 64 * 1024 * 1024


class FrameWriter:
    """Writes whole frames to a file descriptor; safe to share between threads."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._lock = threading.Lock()
        self.broken = False

    def send(self, message: Mapping[str, Any]) -> None:
        payload = json.dumps(message, separators=(",", ":")).encode("utf-8")
        data = memoryview(_HEADER.pack(len(payload)) + payload)
        with self._lock:
            if self.broken:
                return
            try:
                while data:
                    written = os.write(self._fd, data)
                    data = data[written:]
            except OSError:
                self.broken = True  # the parent is gone; the run goes on untraced


class FrameReader:
    """Incrementally decodes frames from bytes fed to it."""

    def __init__(self) -> None:
        self._buffer = bytearray()

    def feed(self, data: bytes) -> Iterator[dict[str, Any]]:
        self._buffer += data
        while len(self._buffer) >= _HEADER.size:
            (length,) = _HEADER.unpack_from(self._buffer)
            if length > MAX_FRAME:
                raise ValueError(f"frame of {length} bytes exceeds the limit")
            end = _HEADER.size + length
            if len(self._buffer) < end:
                return
            payload = bytes(self._buffer[_HEADER.size : end])
            del self._buffer[:end]
            message = json.loads(payload)
            if isinstance(message, dict):
                yield message
