"""Entry point of the traced child process (runs in the user's interpreter).

Runs the target as ``python SCRIPT ARGS`` / ``python -m MODULE ARGS`` would (``sys.argv``,
``__main__``, ``sys.path[0]``, exit status, traceback on stderr), with the tracer on, and
streams aggregates to the parent over the channel fd. Everything it patches
(``os._exit``) is for the child's own lifetime only.
"""

from __future__ import annotations

import atexit
import contextlib
import faulthandler
import gc
import importlib.machinery
import os
import runpy
import select
import signal
import sys
import threading
import time
import tokenize
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import NoReturn

from shapelens.debug import PYDEVD_PLUGIN_ROOT
from shapelens.engine import OUR_THREADS
from shapelens.engine.backends.choice import BackendUnavailable, choose_backend
from shapelens.engine.recording.scope import ScopeConfig
from shapelens.engine.session import Engine, EngineConfig
from shapelens.engine.torch_support.shape_only import STATUS as STOP_STATUS
from shapelens.engine.torch_support.shape_only import stop_reason
from shapelens.runner.contract import ChildConfig
from shapelens.runner.protocol import FrameWriter
from shapelens.trace import messages

WAITING_AFTER_S = 1.0
"""A rank reports a collective it has been waiting in for this long (the launcher decides
whether every rank waits: a hang)."""


@dataclass(frozen=True)
class RankHooks:
    """How a rank of a distributed run talks to its launcher besides its trace file."""

    on_stopped: Callable[[], None]
    """After the last flush a "stop" asked for: the rank's acknowledgement."""
    on_waiting: Callable[[float | None], None]
    """With the wall-clock start of the collective the rank has waited in for
    :data:`WAITING_AFTER_S`, or None once it waits in none."""


class ChildRun:
    """One traced run inside the child: set-up, execution, flushing, and the end record."""

    def __init__(self, config: ChildConfig, rank: RankHooks | None = None) -> None:
        """``rank``: this child is a rank of a distributed run (its collectives and its
        position are recorded too)."""
        self.config = config
        self._rank = rank
        self._real_exit: Callable[[int], NoReturn] = os._exit
        self.writer = FrameWriter(config.channel_fd)
        tracing = config.options.tracing
        always = (os.path.abspath(config.target),) if config.mode == "script" else ()
        scope = ScopeConfig(
            root=config.root,
            always=always,
            include=tracing.include,
            exclude=tracing.exclude,
            functions=tracing.functions,
        )
        try:
            backend = choose_backend(tracing.backend)
        except BackendUnavailable as err:
            self.fail(f"--backend {err}")
        self.engine = Engine(
            EngineConfig(
                scope=scope,
                options=config.options,
                backend=backend,
                compile_callbacks=(ChildRun._patched_exit, ChildRun._forked),  # from user code
            )
        )
        self.engine.on_shape_only = self._on_shape_only
        self.scope = self.engine.scope
        self.sources = self.engine.sources
        self._flush_lock = threading.Lock()
        self._ended = False
        self._main_thread = threading.get_ident()
        self._waiting_since: float | None = None
        self._running = False
        """The program's code runs: a rank's flusher reads the main thread's stack only then
        (never while the interpreter shuts down, where process groups are torn down)."""
        self._blocked_at: tuple[str, int] | None = None
        self._blocked_from = 0.0
        if rank is not None:
            self.engine.watch_collectives(self.flush, self._send)

    # -- channel -----------------------------------------------------------------------
    def flush(self, *, last: bool = False) -> None:
        with self._flush_lock:
            for message in self.engine.drain(last=last):
                self.writer.send(message)
            if self._rank is not None and self._running:  # where it is, should it die next
                position = self.engine.position(self._main_thread)
                if position is not None:
                    self.writer.send(position)

    def _blocked_since(self) -> float | None:
        """Since when the main thread stays in torch code that may wait on the other ranks
        (the same frame at the same line at every look)."""
        blocked = self.engine.stacks.blocked_in(self._main_thread)
        where = None if blocked is None else blocked[1]
        if where != self._blocked_at:
            self._blocked_at = where
            self._blocked_from = time.time()
        return None if where is None else self._blocked_from

    def _send(self, message: messages.Message) -> None:
        with self._flush_lock:
            self.writer.send(message)

    def _report_waiting(self) -> None:
        """A rank tells its launcher about a collective it has waited in for a while, or
        torch code it has stayed in (DDP's all-reduce inside ``backward``)."""
        log = self.engine.collectives
        if self._rank is None or log is None or not self._running:
            return
        call = log.pending
        since = call.started if call is not None else self._blocked_since()
        if since is not None and time.time() - since < WAITING_AFTER_S:
            since = None
        if since != self._waiting_since:
            self._waiting_since = since
            self._rank.on_waiting(since)

    def finish(
        self, status: str, exit_code: int, exception: messages.ExceptionRecord | None
    ) -> None:
        """Send the last aggregates and the end record, once."""
        if self._ended:
            return
        self._ended = True
        self.flush(last=True)
        self.writer.send(
            messages.end(
                status=status, exit_code=exit_code, exception=exception, ended_at=time.time()
            )
        )
        # Last: the flush above still names devices as the shape-only run showed them.
        self.engine.close()

    def _flusher(self) -> None:
        """Background flushes (so a crash loses little) and stop requests from the parent."""
        control = self.config.control_fd
        interval = None if "flusher" in self.engine.off else self.config.flush_interval
        while True:
            try:
                ready, _, _ = select.select([control], [], [], interval)
            except (OSError, ValueError):
                return
            if ready:
                try:
                    request = os.read(control, 64)
                except OSError:
                    request = b""
                if not request:  # the parent is gone: don't outlive it
                    os.kill(os.getpid(), signal.SIGKILL)
                if b"stop" in request:
                    with contextlib.suppress(Exception):  # the ack is sent regardless
                        self.flush()
                    self.writer.send(messages.stopped())
                    if self._rank is not None:
                        self._rank.on_stopped()
                    continue
            try:
                self.flush()
                self._report_waiting()
            except Exception:
                continue

    def _forked(self) -> None:
        """A fork of user code (a DataLoader worker, a daemon) is not traced and keeps none
        of our pipes: it runs at full speed, never writes into the channel, and one that
        outlives the run cannot hold the channel open (the parent reads it until EOF)."""
        self.writer.broken = True
        self._ended = True
        sys.settrace(None)
        threading.settrace(None)
        self.engine.forked()
        # faulthandler writes into the crash pipe: a reused descriptor number must not get it.
        faulthandler.disable()
        config = self.config
        for fd in (config.channel_fd, config.control_fd, config.crash_fd):
            with contextlib.suppress(OSError):
                os.close(fd)

    def _patched_exit(self, code: int) -> NoReturn:
        self.finish("exit", code, None)
        self._real_exit(code)

    # -- running -----------------------------------------------------------------------
    def prepare(self) -> tuple[types.CodeType | None, str]:
        """Compile the target, or send a clear error and exit 2."""
        config = self.config
        if config.mode == "module":
            return None, config.target
        path = os.path.abspath(config.target)
        name = config.display
        try:
            with tokenize.open(path) as source_file:
                source = source_file.read()
        except FileNotFoundError:
            self.fail(f"cannot run {name}: no such file")
        except IsADirectoryError:
            self.fail(f"cannot run {name}: it is a directory")
        except (SyntaxError, UnicodeDecodeError) as err:
            self.fail(f"cannot run {name}: not valid UTF-8 or declared encoding ({err})")
        except OSError as err:
            self.fail(f"cannot run {name}: {err.strerror}")
        try:
            code = compile(source, path, "exec", dont_inherit=True)
        except SyntaxError as err:
            where = f"{name}:{err.lineno}" if err.lineno else config.target
            self.fail(f"syntax error in {where}: {err.msg}")
        except ValueError as err:
            self.fail(f"cannot run {name}: {err}")
        self.sources.put(path, source)
        return code, path

    def _start_log(self, destination: str) -> None:
        """The log tracer goes in first; ours chains to it (and restores it)."""
        with _bundled_fallback():
            from shapelens.snooping.tracer import WholeRunSnooper
        output = None if destination == "-" else os.path.abspath(destination)
        scope = self.scope
        snooper = WholeRunSnooper(
            lambda code: scope.user_file(code.co_filename) is not None and scope.wants_code(code),
            output=output,
            overwrite=output is not None,
            color=output is None and sys.stderr.isatty(),
        )
        self.engine.compile.callbacks.append(WholeRunSnooper.trace)
        snooper.install()

    def _wait_for_debugger(self) -> None:
        """debugpy first, then our tracer: on 3.11 ours chains to debugpy's settrace."""
        try:
            with _bundled_fallback():
                import debugpy
        except ImportError:
            self.fail("debugging needs debugpy in the interpreter that runs the script")
        # pydevd reads its plugins' folders from sys.path when it loads: ours shows tensors by
        # shape. Only while it loads: the user's sys.path is theirs.
        sys.path.append(PYDEVD_PLUGIN_ROOT)
        try:
            host, port = debugpy.listen(("127.0.0.1", 0))
        finally:
            sys.path.remove(PYDEVD_PLUGIN_ROOT)
        self.writer.send(messages.debug(host=host, port=port))
        debugpy.wait_for_client()

    def fail(self, message: str) -> NoReturn:
        self.writer.send(messages.error(message))
        self._real_exit(2)

    def run(self) -> NoReturn:
        config = self.config
        python = ".".join(map(str, sys.version_info[:3]))
        self.writer.send(
            messages.hello(
                python=python,
                pid=os.getpid(),
                core=self.engine.backend_choice.core,
                gate_off=self.engine.backend_choice.gate_off,
            )
        )
        code, path = self.prepare()
        self._crash_file = os.fdopen(config.crash_fd, "w", closefd=False)
        faulthandler.enable(file=self._crash_file, all_threads=False)
        flusher = threading.Thread(target=self._flusher, name=f"{OUR_THREADS}flush", daemon=True)
        flusher.is_pydev_daemon_thread = True  # type: ignore[attr-defined]  # never paused
        flusher.start()
        if config.options.tracing.debug:
            self._wait_for_debugger()
        os.register_at_fork(after_in_child=self._forked)
        os._exit = self._patched_exit  # type: ignore[assignment]
        # Registered first, so it runs last: after user atexit handlers and thread joins.
        atexit.register(self._at_exit)
        self._outcome: tuple[str, int, messages.ExceptionRecord | None] = ("ok", 0, None)
        if code is not None:
            main = types.ModuleType("__main__")
            main.__dict__.update(
                {
                    "__file__": path,
                    "__builtins__": __builtins__,
                    "__cached__": None,
                    "__spec__": None,
                    "__loader__": importlib.machinery.SourceFileLoader("__main__", path),
                }
            )
            sys.modules["__main__"] = main
            sys.argv = [config.target, *config.args]
            sys.path[0] = os.path.dirname(path)
            self._execute(lambda: exec(code, main.__dict__))
        else:
            sys.argv = [config.target, *config.args]
            sys.path[0] = os.getcwd()
            self._execute(
                lambda: runpy.run_module(config.target, run_name="__main__", alter_sys=True)
            )
        sys.exit(self._outcome[1])

    def _execute(self, body: Callable[[], object]) -> None:
        exc: BaseException | None = None
        log = self.config.options.tracing.log
        if log is not None:
            try:
                self._start_log(log)
            except (ImportError, OSError) as err:
                self.fail(f"cannot write the log {log}: {err}")
        # Everything made so far (our engine's ~19,000 objects; torch's too in a forked run)
        # lives to the end: frozen, the program's full collections neither scan nor count
        # it. Left in, it set off one more full collection in a char-level GPT's first
        # optimizer step (+0.13 s, in the import of torch._dynamo), tracing on or off.
        gc.freeze()
        self.engine.start()
        self._running = True
        try:
            body()
        except SystemExit as err:
            self._outcome = ("exit", _exit_code(err), None)
        except BaseException as err:
            exc = err
        finally:
            self._running = False
            self.engine.stop()
            if log is not None:
                sys.settrace(None)
                threading.settrace(None)
        if exc is not None and self.config.options.tracing.fake:
            described = self._describe(exc)
            file, line = described["file"], described["line"]
            text = self.sources.get(file).text(line) if file and line else None
            reason = stop_reason(exc, text)
            if reason is not None:  # the run went as far as shapes go: not the program's error
                self._outcome = (STOP_STATUS, 0, {**described, "message": reason})
                where = f"{os.path.basename(file or '?')}:{line}"
                print(f"shapelens: shape-only run stopped at {where}: {reason}", file=sys.stderr)
                return
        if exc is not None:
            self.engine.conclude(exc)
            self._outcome = (
                "exception",
                130 if isinstance(exc, KeyboardInterrupt) else 1,
                self._describe(exc),
            )
            trimmed = _without_our_frames(exc.__traceback__)
            sys.excepthook(type(exc), exc.with_traceback(trimmed), trimmed)

    def _on_shape_only(self, simulated_cuda: bool) -> None:
        self.writer.send(messages.shape_only(simulated_cuda=simulated_cuda))

    def _describe(self, exc: BaseException) -> messages.ExceptionRecord:
        file, line = self.scope.raised_at(exc)
        try:
            message = str(exc)
        except Exception:
            message = "<exception message could not be read>"
        return {"type": type(exc).__qualname__, "message": message, "file": file, "line": line}

    def _at_exit(self) -> None:
        status, code, exception = self._outcome
        self.finish(status, code, exception)
        if self.config.fast_exit:
            for stream in (sys.stdout, sys.stderr):
                with contextlib.suppress(Exception):
                    stream.flush()
            self._real_exit(code)


@contextlib.contextmanager
def _bundled_fallback() -> Iterator[None]:
    """Imports inside find the user's packages first, then those bundled next to shapelens
    (the editor extension ships debugpy and pysnooper there)."""
    bundle = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    sys.path.append(bundle)
    try:
        yield
    finally:
        sys.path.remove(bundle)


# Frames of the runner itself (and runpy's), hidden from the user's tracebacks.
_HIDDEN_FILES = (os.path.dirname(os.path.dirname(os.path.abspath(__file__))), runpy.__file__)


def _without_our_frames(tb: types.TracebackType | None) -> types.TracebackType | None:
    """Drop ShapeLens's own frames (the runner's, the import wrapper's, its torch function
    modes' and torch's code that calls them), as python shows only the user's."""
    hidden: tuple[str, ...] = _HIDDEN_FILES
    overrides = getattr(sys.modules.get("torch.overrides"), "__file__", None)
    if isinstance(overrides, str):  # handle_torch_function: a call handed to our modes
        hidden = (*hidden, overrides)
    torch_root = os.path.dirname(getattr(sys.modules.get("torch"), "__file__", None) or "/")
    entries: list[tuple[types.TracebackType, str]] = []
    while tb is not None:
        filename = tb.tb_frame.f_code.co_filename
        kind = "ours" if filename.startswith(hidden) else "user"
        if kind == "user" and torch_root != "/" and filename.startswith(torch_root + os.sep):
            kind = "torch"
        entries.append((tb, kind))
        tb = tb.tb_next
    kept = [entry for entry, kind in _beside_ours_dropped(entries) if kind != "ours"]
    rebuilt: types.TracebackType | None = None
    for entry in reversed(kept):
        rebuilt = types.TracebackType(rebuilt, entry.tb_frame, entry.tb_lasti, entry.tb_lineno)
    return rebuilt


def _beside_ours_dropped(
    entries: list[tuple[types.TracebackType, str]],
) -> list[tuple[types.TracebackType, str]]:
    """Without torch's frames that exist only because one of our modes ran: those below our
    frames (``OpOverload.__call__`` running an op for the memory watch) and dynamo's
    wrapper just above a mode of ours. torch's frames the program itself went through
    (``linear.py``'s ``forward``) stay, as Python would print them."""
    kinds = [kind for _, kind in entries]
    kept: list[tuple[types.TracebackType, str]] = []
    for index, (entry, kind) in enumerate(entries):
        if kind == "torch":
            before = next((k for k in reversed(kinds[:index]) if k != "torch"), None)
            after = next((k for k in kinds[index + 1 :] if k != "torch"), None)
            if before == "ours" or (after == "ours" and _wraps_a_mode(entry)):
                continue
        kept.append((entry, kind))
    return kept


def _wraps_a_mode(entry: types.TracebackType) -> bool:
    """torch's dynamo-disabling wrapper around a mode's ``__torch_dispatch__``."""
    filename = entry.tb_frame.f_code.co_filename.replace(os.sep, "/")
    return "/torch/_dynamo/" in filename or filename.endswith("/torch/_compile.py")


def _exit_code(err: SystemExit) -> int:
    if err.code is None:
        return 0
    if isinstance(err.code, int):
        return err.code
    print(err.code, file=sys.stderr)
    return 1


def main(config_json: str) -> NoReturn:
    ChildRun(ChildConfig.from_json(config_json)).run()
