"""Starting, cancelling and finishing runs for the server (one active run per file).

Runs reach the server only through :class:`RunHost` (the server satisfies it): this module
never imports the server, so the server can own a :class:`RunManager`."""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Protocol

from lsprotocol import types
from pygls.progress import Progress

from shapelens.lsp.notifications import DEBUG_LISTENING
from shapelens.lsp.settings import Settings
from shapelens.lsp.uris import path_of
from shapelens.present.listing import tracing_stopped
from shapelens.present.memory import peak_status
from shapelens.runner.contract import RunRequest
from shapelens.runner.launcher import (
    RUNNER_PACKAGE,
    RunResult,
    UsageError,
    resolve_python,
    run_traced,
)
from shapelens.runner.warm import WarmRunner, named_fork_server
from shapelens.settings.arguments import ArgumentError, read_arguments
from shapelens.settings.gpu_budget import BudgetError
from shapelens.settings.groups import DistributedOptions, RunCommand, TracingOptions
from shapelens.settings.options import RunOptions
from shapelens.trace import Trace

MAX_FORWARDED_OUTPUT = 1 << 20  # a 1 GB print must not flood the editor


@dataclass(frozen=True, kw_only=True)
class RunParams:
    """A ``shapelens.run`` command's arguments, read against the settings schema."""

    path: str
    """The file the command is about (its ``uri``): it owns the run's results."""
    command: RunCommand
    """The arguments no other group declares (``uri``, ``args``, ``module``, ...)."""
    tracing: TracingOptions
    """The run options the arguments set (``fake``, ``debug``); the rest their defaults."""
    distributed: DistributedOptions

    @property
    def uri(self) -> str:
        return self.command.uri or ""

    @property
    def module(self) -> str | None:
        return self.command.module.strip() if self.command.module else None


class InvalidRunParams(ValueError):
    pass


RUN_ARGUMENTS = (RunCommand, TracingOptions, DistributedOptions)
"""The schema's groups whose settings ``shapelens.run`` takes as arguments."""


def parse_run_params(raw: Any) -> RunParams:
    try:
        command, tracing, distributed = read_arguments(
            "shapelens.run", raw, tuple(group() for group in RUN_ARGUMENTS)
        )
    except ArgumentError as err:
        raise InvalidRunParams(str(err)) from None
    path = path_of(command.uri)
    if path is None:
        raise InvalidRunParams(f"shapelens.run: uri is not a file URI: {command.uri}")
    return RunParams(path=path, command=command, tracing=tracing, distributed=distributed)


class _ActiveRun:
    def __init__(self) -> None:
        self.cancel = threading.Event()
        self.done = asyncio.Event()


class RunHost(Protocol):
    """What a run needs from the language server: settings in; results, messages and
    progress out. Messages and progress are sent from the event loop's thread."""

    @property
    def settings(self) -> Settings: ...

    @property
    def work_done_progress(self) -> Progress: ...

    def supports_progress(self) -> bool: ...

    def workspace_roots(self) -> list[str]: ...

    def show_results(
        self, trace: Trace, sources: dict[str, tuple[str, ...]], owner: str
    ) -> None: ...

    def notify(self, method: str, params: Any) -> None: ...

    def show_message(self, kind: types.MessageType, text: str) -> None: ...

    def log_message(self, kind: types.MessageType, text: str) -> None: ...


class RunManager:
    def __init__(self, host: RunHost) -> None:
        self.host = host
        self._active: dict[str, _ActiveRun] = {}
        # A fork server named by SHAPELENS_FORK_SERVER (a test suite's) serves every run
        # that suits it from the first, as it does for `shapelens run`; none else is started
        # while it suits.
        self._warm: WarmRunner | None = named_fork_server()

    def ready_warm_runner(self, python: str, env: dict[str, str]) -> WarmRunner | None:
        """The fork server for ``python`` when there is one already (it may be starting)."""
        if self._warm is not None and self._warm.suits(python, env):
            return self._warm
        return None

    def warm_runner(self, python: str, env: dict[str, str]) -> WarmRunner:
        """The fork server for ``python``, started after the first run (which runs cold:
        started with it, its ``import torch`` would slow the first run down)."""
        if self._warm is not None and not self._warm.suits(python, env):
            self._warm.close()
            self._warm = None
        if self._warm is None:
            self._warm = WarmRunner(python, env)
        return self._warm

    def close(self) -> None:
        if self._warm is not None:
            self._warm.close()
            self._warm = None

    def cancel(self, path: str | None = None) -> int:
        targets = [r for p, r in self._active.items() if path is None or p == path]
        for run in targets:
            run.cancel.set()
        return len(targets)

    async def run(self, params: RunParams) -> dict[str, Any]:
        previous = self._active.get(params.path)
        if previous is not None:  # a second run of the same file replaces the first
            previous.cancel.set()
            await previous.done.wait()
        active = self._active[params.path] = _ActiveRun()
        try:
            return await self._run(params, active)
        finally:
            active.done.set()
            if self._active.get(params.path) is active:
                del self._active[params.path]

    async def _run(self, params: RunParams, active: _ActiveRun) -> dict[str, Any]:
        server = self.host
        name = f"-m {params.module}" if params.module else os.path.basename(params.path)
        try:
            request = _run_request(server, params)
        except BudgetError as err:
            return self._fail(f"shapelens.gpuMemory / shapelens.gpu: {err}")
        try:
            with open(params.path, encoding="utf-8", errors="replace") as source:
                script_source = tuple(source.read().splitlines(keepends=True))
        except OSError:
            return self._fail(f"cannot run {params.path}: no such file")
        token = await self._begin_progress(name, active) if params.command.progress else None
        loop = asyncio.get_running_loop()
        output = _OutputForwarder(server.log_message, loop)

        def on_output(stream: str, text: str) -> None:
            output.feed(stream, text)

        sources: dict[str, tuple[str, ...]] = {params.path: script_source}
        try:
            python = resolve_python(request.python)
        except UsageError:
            python = None  # the run reports the bad interpreter
        warm = None if python is None else self.ready_warm_runner(python, dict(request.env or {}))

        def publish(trace: Trace) -> None:
            for path in trace.files:
                if path not in sources:
                    sources[path] = read_lines(path)
            server.show_results(trace, sources, owner=params.path)

        def on_snapshot(trace: Trace) -> None:  # hints of a long run appear as it goes
            loop.call_soon_threadsafe(publish, trace)

        def on_debug(host: str, port: int) -> None:
            loop.call_soon_threadsafe(self._announce_debugger, params, host, port)

        def start() -> RunResult:
            if params.distributed.nproc_per_node is not None:
                from shapelens.runner.distributed import run_distributed

                return run_distributed(
                    request,
                    params.distributed.nproc_per_node,
                    collective_timeout_s=params.distributed.collective_timeout_s,
                    on_output=on_output,
                    cancel=active.cancel,
                )
            return run_traced(
                request,
                on_output=on_output,
                on_snapshot=on_snapshot,
                on_debug=on_debug,
                cancel=active.cancel,
                warm=warm,
            )

        try:
            result = await loop.run_in_executor(None, start)
        except UsageError as err:
            self._end_progress(token, str(err))
            return self._fail(str(err))
        finally:
            if python is not None and warm is None:
                with contextlib.suppress(OSError):  # the next run forks from it when ready
                    self.warm_runner(python, dict(request.env or {}))
        output.flush()
        trace = result.trace
        if result.error is not None:
            self._end_progress(token, result.error)
            return self._fail(result.error)
        publish(trace)
        summary = _summary(trace, active.cancel.is_set())
        self._end_progress(token, f"{summary['status']} in {trace.duration_s:.1f}s")
        self._announce(name, trace, summary["status"])
        return summary

    def _announce_debugger(self, params: RunParams, host: str, port: int) -> None:
        """Any DAP client can attach; the VS Code extension does so on this notification."""
        # `hide`: paths a DAP client should treat as not the user's code (debugpy `rules`).
        where = {"uri": params.uri, "host": host, "port": port, "hide": [RUNNER_PACKAGE]}
        self.host.notify(DEBUG_LISTENING, where)
        if params.command.client_attaches:
            return
        self.host.show_message(
            types.MessageType.Info,
            f"ShapeLens: debugpy is waiting on {host}:{port}; attach a debugger",
        )

    async def _begin_progress(self, name: str, active: _ActiveRun) -> str | None:
        server = self.host
        if not server.supports_progress():
            return None
        token = f"shapelens-run-{uuid.uuid4()}"
        try:
            await server.work_done_progress.create_async(token)
        except Exception:
            return None
        server.work_done_progress.begin(
            token,
            types.WorkDoneProgressBegin(
                title="ShapeLens", message=f"running {name}", cancellable=True
            ),
        )
        # The client's cancel resolves this future: stop the run, keep what it collected.
        future = server.work_done_progress.tokens.get(token)
        if future is not None:
            future.add_done_callback(lambda _: active.cancel.set())
        return token

    def _end_progress(self, token: str | None, message: str) -> None:
        if token is None:
            return
        self.host.work_done_progress.end(token, types.WorkDoneProgressEnd(message=message))
        self.host.work_done_progress.tokens.pop(token, None)

    def _fail(self, message: str) -> dict[str, Any]:
        self.host.show_message(types.MessageType.Error, f"ShapeLens: {message}")
        return {"status": "error", "message": message}

    def _announce(self, name: str, trace: Trace, status: str) -> None:
        if trace.tracing_stopped is not None:
            self.host.show_message(
                types.MessageType.Warning,
                f"ShapeLens: {name}: {tracing_stopped(trace.tracing_stopped)}",
            )
        exc = trace.exception
        where = f" at line {exc.line}" if exc is not None and exc.line else ""
        if status == "ok" or (status == "exit" and trace.exit_code == 0):
            return
        if status == "cancelled":
            text, kind = f"run of {name} cancelled; partial results shown", types.MessageType.Info
        elif status == "timeout":
            text = f"{name} stopped by the time limit; partial results shown"
            kind = types.MessageType.Warning
        elif status == "crashed":
            text = f"{name} crashed ({trace.detail}){where}; partial results shown"
            kind = types.MessageType.Error
        elif status == "shape_only_stop" and exc is not None:
            text = f"shape-only run of {name} stopped{where}: {exc.message}"
            kind = types.MessageType.Info
        elif status == "exception" and exc is not None:
            first = exc.message.strip().splitlines()[0] if exc.message.strip() else ""
            text = f"{name}: {exc.type}{where}: {first}"
            kind = types.MessageType.Error
        else:
            text = f"{name} exited with status {trace.exit_code}" + (
                f" ({trace.detail})" if trace.detail else ""
            )
            kind = types.MessageType.Warning
        self.host.show_message(kind, f"ShapeLens: {text}")


class _OutputForwarder:
    """The script's output as ``window/logMessage``, one message per batch of whole lines
    (unbuffered writes arrive in fragments: "parent", " ", "42\\n"), capped per run."""

    def __init__(
        self, log: Callable[[types.MessageType, str], None], loop: asyncio.AbstractEventLoop
    ) -> None:
        self.log = log  # called on the loop: output arrives on the runner's threads
        self.loop = loop
        self.forwarded = 0
        self.partial: dict[str, str] = {}
        self.lock = threading.Lock()

    def feed(self, stream: str, text: str) -> None:
        with self.lock:
            if self.forwarded >= MAX_FORWARDED_OUTPUT:
                return
            self.forwarded += len(text)
            buffered = self.partial.get(stream, "") + text
            complete, newline, rest = buffered.rpartition("\n")
            self.partial[stream] = rest
            if self.forwarded >= MAX_FORWARDED_OUTPUT:
                complete += f"\n[shapelens: output beyond {MAX_FORWARDED_OUTPUT} bytes not shown]"
            if newline or self.forwarded >= MAX_FORWARDED_OUTPUT:
                self._send(stream, complete)

    def flush(self) -> None:
        with self.lock:
            for stream, rest in self.partial.items():
                if rest:
                    self._send(stream, rest)
            self.partial.clear()

    def _send(self, stream: str, text: str) -> None:
        kind = types.MessageType.Log if stream == "stdout" else types.MessageType.Warning
        self.loop.call_soon_threadsafe(self.log, kind, text)


def _summary(trace: Trace, cancelled: bool) -> dict[str, Any]:
    status = "cancelled" if cancelled and trace.status == "timeout" else trace.status
    return {
        "status": status,
        "exitCode": trace.exit_code,
        "lines": len(trace.lines),
        "findings": len(trace.findings),
        "durationS": round(trace.duration_s, 3),
        "compileMode": trace.compile_mode,  # "eager", "compiled" or None (no torch.compile)
        "shapeOnly": trace.shape_only is not None,  # fake tensors: shapes, no values
        # values the program read that a shape-only run stood in for, for the status bar
        "simulatedValues": 0 if trace.shape_only is None else trace.shape_only.simulated_values,
        # a shape-only run's peak memory, for the status bar
        "memory": None if trace.memory is None else peak_status(trace.memory, os.getcwd()),
    }


def read_lines(path: str) -> tuple[str, ...]:
    try:
        with open(path, encoding="utf-8", errors="replace") as source:
            return tuple(source.read().splitlines(keepends=True))
    except OSError:
        return ()


def _run_request(host: RunHost, params: RunParams) -> RunRequest:
    """What the child is asked to run: the command's arguments over the server's settings."""
    settings = host.settings
    command = params.command
    tracing = params.tracing
    if command.function:
        tracing = replace(tracing, functions=(command.function,))
    return RunRequest.for_options(
        target=params.module or params.path,
        args=command.args,
        module=params.module is not None,
        options=RunOptions(tracing=tracing, run=settings.run, findings=settings.findings),
        cwd=command.cwd or _working_directory(host, params.path),
        env={**os.environ, **settings.run.extra_env, **command.env},
        capture_output=True,
        stdin="empty",  # our stdin is the JSON-RPC stream
    )


def _working_directory(host: RunHost, path: str) -> str:
    """The workspace folder holding the file (as VS Code's own Run does), else its folder."""
    for root in host.workspace_roots():
        if path.startswith(os.path.join(root, "")):
            return root
    return os.path.dirname(path)
