"""The engine, assembled in one place from one configuration.

Every wiring of the engine (the runner's child, a notebook kernel's cell, ``snoop``'s
recording) builds an :class:`Engine` from an :class:`EngineConfig`, as coverage.py's
``Collector._start_tracer`` assembles whichever core was chosen: the scope, the sources,
the rules the findings settings switch on and the dispatcher that hands them events, the
statement recorder, the tracing backend, compile control, the module tree, shape-only
runs and memory. So a rule, or a remedy such as running ``torch.compile`` regions eagerly,
applies to all of them alike. What is the caller's own (a channel, the program's
execution, a kernel's trace file) stays with the caller; what the engine recorded comes
out of :meth:`Engine.drain` as the channel's messages.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

from shapelens.engine import SHAPELENS_DIR
from shapelens.engine.backends.choice import (
    BackendChoice,
    TracingBackend,
    build_backend,
    choose_backend,
)
from shapelens.engine.distributed.collectives import CollectiveLog
from shapelens.engine.distributed.stacks import UserStacks
from shapelens.engine.findings.collate import WorkerBatches
from shapelens.engine.findings.context import RunFacts
from shapelens.engine.findings.dispatch import Dispatcher
from shapelens.engine.findings.events import CallFailed, RanOutOfMemory
from shapelens.engine.findings.nonfinite_origin import OriginSearch
from shapelens.engine.findings.nonfinite_scan import NonfiniteScan
from shapelens.engine.findings.provenance import Provenance
from shapelens.engine.findings.replay import Replay
from shapelens.engine.findings.rules import rules_for
from shapelens.engine.memory.ledger import MemoryLedger
from shapelens.engine.memory.watch import MemoryWatch
from shapelens.engine.modules.tree import ModuleTree
from shapelens.engine.recording.run_records import RunRecords, VarStats
from shapelens.engine.recording.scope import ScopeConfig, UserCodeScope
from shapelens.engine.recording.statement_recorder import StatementRecorder
from shapelens.engine.source.source_map import SourceMaps
from shapelens.engine.switches import switched_off
from shapelens.engine.torch_support.after_import import when_imported
from shapelens.engine.torch_support.shape_only import ShapeOnly
from shapelens.engine.torch_support.shape_only_ranks import ShapeOnlyRanks
from shapelens.engine.torch_support.torch_compile import CompileControl
from shapelens.settings.gpu_budget import budget_bytes
from shapelens.settings.options import RunOptions
from shapelens.trace import messages
from shapelens.trace.finding import finding_to_json


@dataclass(frozen=True, kw_only=True)
class EngineConfig:
    """What to build: the run's options (the settings schema's groups), which code is the
    user's, and what the caller knows that the engine cannot read for itself."""

    scope: ScopeConfig
    options: RunOptions = field(default_factory=RunOptions)
    backend: BackendChoice
    """The tracing backend (``choose_backend``: the caller says, or reports, why not)."""
    sources: Mapping[str, str] = field(default_factory=dict)
    """Code whose cached text is not what ran (a notebook cell as it was executed)."""
    earlier: Sequence[VarStats] = ()
    """Values that earlier runs of the same process bound (their birth lines, for findings)."""
    whole_program: bool = True
    """The engine traces a program's own flow (a script, a cell): ``torch.compile`` regions
    are controlled and ``nn.Module`` calls make the module tree. False: another tracer picks
    the frames and hands them over (``snoop``)."""
    module_tree: bool = True
    compile_callbacks: Sequence[Callable[..., Any]] = ()
    """Callbacks of the caller that run inside user code (an exit hook): kept out of dynamo."""


_OUR_ROOT = SHAPELENS_DIR + os.sep


class Engine:
    """One run's engine, built from an :class:`EngineConfig`."""

    def __init__(self, config: EngineConfig) -> None:
        self.config = config
        options = self.options = config.options
        self.records = RunRecords(earlier=config.earlier)
        self.scope = UserCodeScope(config.scope)
        self.sources = SourceMaps()
        for name, text in config.sources.items():
            self.sources.put(name, text)
        findings = options.findings
        self.facts = RunFacts(
            self.records.origin_of,
            self.sources,
            self.scope,
            provenance=Provenance(),
            scan=NonfiniteScan(findings.nonfinite_max_elements, findings.nonfinite_on_gpu),
            hits_of=self.records.hits_now,
        )
        self.dispatch = Dispatcher(rules_for(findings, self.facts))
        self.recorder = StatementRecorder(
            scope=self.scope,
            records=self.records,
            sources=self.sources,
            dispatch=self.dispatch,
            facts=self.facts,
        )
        self.off = off = switched_off()  # a measurement's (:mod:`shapelens.engine.switches`)
        if "reads" in off:
            self.recorder._read_names = _nothing_read
        keep_compile = options.run.keep_compile
        # Dynamo would trace the op watch's torch function mode inside compiled regions.
        self.recorder.op_watch.enabled = not keep_compile and "op_watch" not in off
        fake, memory = options.tracing.fake, options.run.memory
        if self.dispatch.wants(CallFailed) and not (keep_compile or fake or memory):
            # A call that fails on a hit the op watch did not follow is run again on fakes
            # (where fake tensors or the memory watch run already, they would see it).
            self.recorder.replay = Replay(self.recorder.known, self.records.origin_of)
            # A batch a DataLoader worker failed on is fetched again here, after the program.
            self.recorder.worker_batches = WorkerBatches()
        if not (keep_compile or fake):  # values to run again with, and no graph to break
            self.facts.origins = OriginSearch(self.recorder.known, self.facts.scan)
        self.recorder.reader.scalars_on_gpu = options.run.scalars_on_gpu  # 0-dim reads sync a GPU
        self.backend_choice = config.backend
        self.backend: TracingBackend = build_backend(
            self.recorder, config.backend, sample_hits=options.tracing.sample_hits
        )
        self.compile = CompileControl(
            scope=self.scope,
            records=self.records,
            keep=keep_compile,
            callbacks=config.compile_callbacks,
        )
        # Dynamo would trace our reading of module calls inside compiled regions, too.
        wants_tree = config.whole_program and config.module_tree and not keep_compile
        wants_tree = wants_tree and not off.intersection(("modules", "tracing"))
        self.modules = ModuleTree(self.scope, self.sources) if wants_tree else None
        self.shape_only = ShapeOnly(
            self._user_line,
            lambda file, line: self.sources.get(file).text(line),
            stop_at_values=options.tracing.stop_at_values,
        )
        self.on_shape_only: Callable[[bool], None] | None = None
        """Told when a shape-only run's fake tensors are ready (whether CUDA is simulated)."""
        # A budget is the simulated GPU's: a real run's device has its own memory.
        budget = budget_bytes(options.run.gpu_memory, options.run.gpu) if fake else None
        self.memory = MemoryLedger(budget_bytes=budget)
        self._memory_watch: MemoryWatch | None = None
        self._out_of_memory_sent = False
        self.stacks = UserStacks(self.scope.user_file, _OUR_ROOT)
        self.collectives: CollectiveLog | None = None
        self._position: tuple[list[list[Any]], str | None] | None = None

    # -- running ------------------------------------------------------------------------
    def start(self) -> None:
        """Trace from here on (this thread, and threads started later)."""
        options = self.options
        if self.config.whole_program:
            self.compile.install()
        if options.tracing.fake:
            self.shape_only.install(self._shape_only_ready)
        elif options.run.memory:  # opt-in: a dispatch mode on every op of a real run
            when_imported("torch", lambda torch: self._watch_memory())
        if self.recorder.worker_batches is not None:
            self.recorder.worker_batches.install()
        if "tracing" not in self.off:
            self.backend.start()
        if self.modules is not None:
            self.modules.install(self.backend, self.recorder)

    def stop(self) -> None:
        """Stop tracing (always: also when the program failed)."""
        self.backend.stop()

    def watch_collectives(
        self, flush: Callable[[], None], send: Callable[[messages.Collectives], None]
    ) -> CollectiveLog:
        """A rank of a distributed run: record its ``torch.distributed`` collectives
        (``flush`` writes its results before a call from user code, ``send`` the call's
        end after it)."""
        log = CollectiveLog(self.stacks.from_frame, self.stacks.is_user_frame, flush, send)
        self.collectives = log
        if self.options.tracing.fake:  # fake tensors carry no data: the ranks exchange none
            ranks = self.shape_only.ranks = ShapeOnlyRanks()
            log.run_call = ranks.call
        when_imported("torch.distributed", log.install)
        return log

    def position(self, thread: int) -> messages.Position | None:
        """Where ``thread`` is in user code now (and in which torch code that may wait on
        other ranks, ``backward``), when that changed since the last call."""
        stack = self.stacks.of_thread(thread)
        blocked = self.stacks.blocked_in(thread)
        inside = None if blocked is None else blocked[0]
        if (stack, inside) == self._position:
            return None
        self._position = (stack, inside)
        return messages.position(stack, inside)

    def conclude(self, exc: BaseException | None) -> None:
        """The run ended with ``exc``: the findings that explain it are recorded."""
        self.recorder.conclude(exc)

    def close(self) -> None:
        """After the last drain: what replaced torch's own behaviour is put back."""
        if self._memory_watch is not None:
            self._memory_watch.stop()
        if self.collectives is not None:
            self.collectives.uninstall()
        self.shape_only.remove()
        if self.recorder.worker_batches is not None:
            self.recorder.worker_batches.remove()
        if self.config.whole_program:
            self.compile.uninstall()

    def forked(self) -> None:
        """In a forked child of user code: tracing off there for good, and the op watch's
        mode off the child's stack (a DataLoader worker forked while the loop's line was
        watched ran every collate call through it: its frame in the worker's tracebacks)."""
        self.backend.forked()
        self.recorder.op_watch.enabled = False
        self.recorder.op_watch.pause()

    def drain(self, *, last: bool = False) -> list[messages.Message]:
        """What changed since the last drain, as the channel's messages."""
        if last:
            self._report_out_of_memory()
        out = list(self.records.drain(last=last))
        if self.modules is not None:
            tree = self.modules.drain(last=last)
            if tree is not None:
                out.append(tree)
        if self.memory.changed:
            self.memory.changed = False
            out.append(messages.memory(self.memory.report()))
        if self.collectives is not None:
            calls = self.collectives.drain()
            if calls is not None:
                out.append(calls)
        reads = self.shape_only.reads
        if reads is not None and reads.changed:
            reads.changed = False
            out.append(messages.simulated(reads.entries()))
        return out

    def _user_line(self) -> tuple[str, int] | None:
        """The innermost line of user code running now (a value read's, deep in torch)."""
        frame: FrameType | None = sys._getframe(2)
        user_file = self.scope.user_file
        while frame is not None:
            path = user_file(frame.f_code.co_filename)
            if path is not None and not path.startswith(_OUR_ROOT):
                return path, frame.f_lineno
            frame = frame.f_back
        return None

    def _report_out_of_memory(self) -> None:
        # At the end: a step or backward under way when it ran out settles its breakdown.
        event = self.memory.out_of_memory
        if event is None or self._out_of_memory_sent:
            return
        self._out_of_memory_sent = True
        file, line = event.where
        text = self.sources.get(file).text(line).strip()
        for finding in self.dispatch.emit(RanOutOfMemory(event=event, expression=text)):
            self.records.add_finding(finding_to_json(finding))

    def _shape_only_ready(self, simulated_cuda: bool) -> None:
        self.recorder.op_watch.base_depth = 1  # its mode stays on torch's function stack
        if self.on_shape_only is not None:
            self.on_shape_only(simulated_cuda)
        self._watch_memory()

    def _watch_memory(self) -> None:
        """Count storages and FLOPs from here on: fake ones (inside the shape-only run's
        fake mode), or a real run's (``--memory``)."""
        self._memory_watch = MemoryWatch(self.memory, self.scope)
        self._memory_watch.start(sys.modules["torch"])
        if self.modules is not None:
            self.modules.cost_of = self.memory.module_cost
            self.modules.kept_for = self.memory.kept_for
            self.memory.on_module_costs = self.modules.costs_changed


def _nothing_read(*_: Any, **__: Any) -> bool:
    return False


def engine_for(
    scope: ScopeConfig,
    *,
    backend: str = "auto",
    options: RunOptions | None = None,
    whole_program: bool = False,
) -> Engine:
    """An engine of ``backend`` (``choose_backend``'s name) for the frames of ``scope``: by
    default as a tracer that another picks the frames for uses it (``snoop``, tools, tests):
    records and rules, no compile control, no module tree."""
    return Engine(
        EngineConfig(
            scope=scope,
            options=options or RunOptions(),
            backend=choose_backend(backend),
            whole_program=whole_program,
        )
    )
