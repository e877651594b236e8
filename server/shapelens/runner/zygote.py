"""The warm runner's fork server (runs in the user's interpreter): ``python zygote.py SOCKET``.

It imports torch (when installed) and the engine once, then forks a fresh child per run, so
"Run" costs a fork instead of an interpreter start and ``import torch``; user modules are
imported only in the child, so they are never stale. Requests arrive on a Unix socket in a
private directory (no network), each with the child's pipes as passed file descriptors
(SCM_RIGHTS). Single-threaded: children are reaped on SIGCHLD through a wakeup pipe.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import json
import os
import select
import shutil
import signal
import socket
import sys
from typing import Any

MAX_REQUEST = 1 << 20
FD_NAMES = ("stdin", "stdout", "stderr", "channel", "control", "crash")


def _preload() -> None:
    # sys.path holds the package from here on
    from shapelens.engine.torch_support import torch_compat

    try:
        import torch  # noqa: F401  (the point of a warm runner)
    except ImportError:
        pass
    else:
        for name in torch_compat.LAZY_MODULES:  # once here, not in every child
            with contextlib.suppress(Exception):  # a torch build without one of them
                importlib.import_module(name)
    import shapelens.runner.child  # noqa: F401


def _run_child(request: dict[str, Any], fds: dict[str, int]) -> None:
    """In the forked child: become the traced process of this request."""
    from shapelens.runner.child import ChildRun
    from shapelens.runner.contract import ChildConfig

    os.setsid()
    # Ctrl-C raises KeyboardInterrupt, as in a child started cold: the CLI handles SIGINT,
    # and a handled signal is reset at exec. The fork server may have inherited it ignored
    # (started by a shell's background job), which a fork would keep.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    # The caller's stdin (a terminal, a pipe) or /dev/null, never the server's own.
    for name, target in (("stdin", 0), ("stdout", 1), ("stderr", 2)):
        os.dup2(fds[name], target)
    for name in ("stdin", "stdout", "stderr"):  # only as 0, 1, 2: a fork of the program
        if fds[name] > 2:  # that closes those (a daemon) holds none of the caller's pipes
            os.close(fds[name])
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    config = ChildConfig.from_dict(request["config"]).with_fds(
        channel=fds["channel"], control=fds["control"], crash=fds["crash"]
    )
    sys.stdin = os.fdopen(0, "r", closefd=False)  # nothing buffered from the server's pipe
    sys.stdout = os.fdopen(1, "w", buffering=1, closefd=False)
    sys.stderr = os.fdopen(2, "w", buffering=1, closefd=False)
    ChildRun(dataclasses.replace(config, fast_exit=True)).run()


def serve(path: str) -> None:
    _preload()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(8)
    wakeup_read, wakeup_write = os.pipe()
    os.set_blocking(wakeup_write, False)
    signal.set_wakeup_fd(wakeup_write)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    # SIGTERM (the editor ending its process group) ends the loop as a closed stdin does, so
    # the folder goes too; a run gets the disposition the server started with.
    terminated: list[int] = []
    started_with = signal.signal(signal.SIGTERM, lambda number, _: terminated.append(number))
    children: dict[int, socket.socket] = {}
    print("ready", flush=True)
    while True:
        try:
            ready, _, _ = select.select([listener, wakeup_read, sys.stdin], [], [])
        except InterruptedError:
            continue
        if sys.stdin in ready and not sys.stdin.readline():
            break  # the server closed our stdin: it is gone, so are we
        if wakeup_read in ready:
            os.read(wakeup_read, 4096)
            _reap(children)
            if terminated:
                break
        if listener in ready:
            connection, _ = listener.accept()
            message, fds, _, _ = socket.recv_fds(connection, MAX_REQUEST, len(FD_NAMES))
            request = json.loads(message)
            pid = os.fork()
            if pid == 0:
                listener.close()
                signal.set_wakeup_fd(-1)
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                signal.signal(signal.SIGTERM, started_with or signal.SIG_DFL)  # None: C's
                # run() ends with sys.exit: SystemExit leaves serve() and this child exits as
                # python does (thread joins, then atexit, where the last results are sent).
                _run_child(request, dict(zip(FD_NAMES, fds, strict=True)))
                os._exit(70)  # not reached: never fall back into the server loop
            for fd in fds:
                os.close(fd)
            connection.sendall(json.dumps({"pid": pid}).encode() + b"\n")
            children[pid] = connection
            _reap(children)
    for connection in children.values():
        connection.close()
    # Our starter gone without closing us (killed outright), or a SIGTERM: a starter that
    # closes us kills us first, then removes the private folder it made for our socket
    # alone; so here that is ours to remove.
    listener.close()
    shutil.rmtree(os.path.dirname(path), ignore_errors=True)


def _reap(children: dict[int, socket.socket]) -> None:
    while children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        connection = children.pop(pid, None)
        if connection is not None:
            code = os.waitstatus_to_exitcode(status)
            with contextlib.suppress(OSError):
                connection.sendall(json.dumps({"exit": code}).encode() + b"\n")
            connection.close()


if __name__ == "__main__":
    sys.path[0] = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    serve(sys.argv[1])
