"""Finding the traces Jupyter kernels write (``%load_ext shapelens``) and noticing rewrites.

A kernel session writes one file, ``kernel-*.json``, and rewrites it atomically after each
cell: into ``$SHAPELENS_TRACE_DIR`` when set, else ``<kernel cwd>/.shapelens/``. The server
looks in the ``.shapelens/`` folder of every workspace folder and of every open notebook's
folder (a notebook's kernel usually starts there), in ``$SHAPELENS_TRACE_DIR`` and in the
``shapelens.traceDir`` setting. Polling ``os.scandir`` costs a few system calls per folder
and needs nothing from the client.

Reading a trace only parses JSON: nothing here executes code. A file that does not load
(half-written by a non-atomic writer, another schema, not JSON) is skipped quietly until it
changes again."""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass

from shapelens.trace import Trace
from shapelens.trace.codec import load_trace

TRACE_DIR_ENV = "SHAPELENS_TRACE_DIR"
FOLDER = ".shapelens"
PREFIX = "kernel-"
SUFFIX = ".json"
POLL_INTERVAL_S = 0.5
MAX_TRACE_BYTES = 512 << 20
"""A bigger file is not a kernel trace we can show: skipped rather than read."""


def trace_dirs(
    roots: Iterable[str],
    notebook_dirs: Iterable[str],
    env_dir: str | None,
    setting: str | None,
) -> list[str]:
    """The folders to look in, each once, in a stable order. A relative ``setting`` is
    taken relative to every workspace folder."""
    roots = list(roots)
    found = [os.path.join(root, FOLDER) for root in roots]
    found += [os.path.join(folder, FOLDER) for folder in notebook_dirs]
    if env_dir:
        found.append(os.path.expanduser(env_dir))
    if setting:
        setting = os.path.expanduser(setting)
        if os.path.isabs(setting):
            found.append(setting)
        else:
            found += [os.path.join(root, setting) for root in roots]
    return list(dict.fromkeys(os.path.abspath(folder) for folder in found))


@dataclass(frozen=True)
class Stamp:
    mtime_ns: int
    size: int
    inode: int


@dataclass(frozen=True)
class Scan:
    changed: list[str]
    """New or rewritten files (each to be loaded again)."""
    gone: list[str]
    """Files that were seen before and are no longer there (or no longer looked at)."""


class KernelTraceFiles:
    """The kernel trace files last seen and their stamps: what changed since the last scan."""

    def __init__(self) -> None:
        self._seen: dict[str, Stamp] = {}

    def scan(self, dirs: Iterable[str]) -> Scan:
        now: dict[str, Stamp] = {}
        for folder in dirs:
            try:
                entries = list(os.scandir(folder))
            except OSError:  # not there (yet), not a folder, not readable
                continue
            for entry in entries:
                if not (entry.name.startswith(PREFIX) and entry.name.endswith(SUFFIX)):
                    continue
                try:
                    if not entry.is_file():
                        continue
                    info = entry.stat()
                except OSError:
                    continue
                now[os.path.abspath(entry.path)] = Stamp(
                    info.st_mtime_ns, info.st_size, info.st_ino
                )
        changed = sorted(path for path, stamp in now.items() if self._seen.get(path) != stamp)
        gone = sorted(path for path in self._seen if path not in now)
        self._seen = now
        return Scan(changed=changed, gone=gone)


def read_kernel_trace(path: str) -> Trace | None:
    """The trace in ``path``, or None when it cannot be read as one (never raises)."""
    try:
        if os.path.getsize(path) > MAX_TRACE_BYTES:
            return None
        return load_trace(path)
    except Exception:
        return None
