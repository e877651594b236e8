"""The model as it ran: every ``nn.Module`` call, seen as ``Module._wrapped_call_impl``
returns.

The tracing backend reports each return of torch's ``Module._wrapped_call_impl`` (what
``module(x)`` runs: ``Module.__call__``) to :meth:`ModuleTree.returned`, which counts the
call and reads the shapes of the tensors that went in and came out. No hook is registered: a
global forward hook would send every module call down torch's slower ``_call_impl`` path
(three more Python frames, each an event under ``sys.settrace``), measured at 25 µs a call
on 3.11 against ~3 µs for this. The outer frame is the one watched because it has three
locals (``self``, ``args``, ``kwargs``) against ``_call_impl``'s dozen: reading a frame's
locals builds them all, 1.5 µs against 3.6 µs a call on 3.12. Paths from the root
(``transformer.h.0.attn``), parameter counts and where each module was declared are worked
out when the records are sent, not per call (:mod:`shapelens.engine.modules.layout`).

Quiet spells. Once every module called since the tree last woke has had :data:`QUIET_AFTER`
calls in a row that brought nothing new (no dim outside its ranges, no new number of dims,
dtype or device), the tree stops watching returns. While it is quiet a module's calls are
estimated from its pace: the user statement that called the outermost module call it ran
under (the loop header or def line enclosing it), whose hits the line tracer counts
exactly, times the module's calls per whole hit of it while watched. It wakes (and watches
every call again) when a user line reads something new, when the backend re-arms its
switched-off lines, and before a module that is new, or gets a first tensor new to it, is
called (:meth:`ModuleTree.calling`: a ``CALL`` event of user code under ``sys.monitoring``,
each ``Module.__call__``'s call event under ``sys.settrace``). Estimated counts are marked
(``calls_sampled``)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from types import CodeType, FrameType, ModuleType
from typing import Any, Protocol

from shapelens.engine.modules.calls import (
    ModuleStats,
    Pace,
    estimated_since_quiet,
    hits_of,
    observe_call,
)
from shapelens.engine.modules.layout import Layout, entry, lay_out
from shapelens.engine.recording.scope import UserCodeScope
from shapelens.engine.source.source_map import SourceMaps
from shapelens.engine.switches import tuned
from shapelens.engine.torch_support import torch_compat
from shapelens.engine.torch_support.after_import import when_imported
from shapelens.trace import messages

MAX_MODULES = 5000
"""Modules created in a loop (a fresh ``nn.Linear`` per step) would grow without bound."""
QUIET_AFTER = tuned(16)
"""Calls in a row with nothing new, for each module called since the tree woke, before the
tree stops watching. Not the line tracer's 64 dense hits (:data:`sampling.DENSE_HITS`): a
quiet tree wakes before a call from user code that brings a module or a first tensor new to
it (:meth:`ModuleTree.calling`), so the last, smaller batch is watched anyway; the 48 calls
more per module were 3–6 ms of a 400-step MLP's 100 (3.12). Where the backend cannot stop
watching (``sys.settrace``) every call is counted, whatever this is."""
WAKE_AFTER_CHECKS = 4096
"""A quiet tree also wakes after this many calls were checked (see :meth:`calling`), so its
estimates keep being measured where nothing else wakes it (``sys.settrace``)."""


OnReturn = Callable[[FrameType, Any], None]
"""``on_return(frame, value)``: a frame of a watched code object returned ``value``."""
OnRearm = Callable[[], None]
"""``on_rearm()``: the backend looks again at the user lines it switched off."""


class ReturnWatch(Protocol):
    """A tracing backend that can report the returns of one code object of library code."""

    def watch_returns(self, code: CodeType, on_return: OnReturn, on_rearm: OnRearm) -> None:
        """Call ``on_return(frame, value)`` whenever a frame of ``code`` returns a value, and
        ``on_rearm()`` when the backend looks again at the user lines it switched off."""

    def check_calls(self, check: Callable[[Any, Any], bool]) -> None:
        """Call ``check(callee, first_argument)`` before calls run: under sys.monitoring each
        call user code makes (a call site whose check said False need not be checked again),
        under sys.settrace each module call while returns are paused."""

    def pause_returns(self) -> bool:
        """Stop reporting returns until :meth:`resume_returns`; False if it cannot."""

    def resume_returns(self) -> None:
        """Report returns again."""


class Paces(Protocol):
    """The line tracer's exact counts, which pace the module calls of a quiet spell."""

    def pace_of(self, frame: FrameType | None) -> Pace | None:
        """The pace of a call made by ``frame`` or its callers (None: no user code there)."""

    def on_news(self, listener: Callable[[], None]) -> None:
        """Call ``listener()`` whenever a user line's read sees something new."""


class ModuleTree:
    """Records module calls once torch is imported; :meth:`drain` gives the channel message."""

    def __init__(self, scope: UserCodeScope, sources: SourceMaps) -> None:
        self.cost_of: Callable[[int], dict[str, int] | None] | None = None
        """A shape-only run's memory and FLOPs of a module's latest forward, by its id."""
        self.kept_for: Callable[[int], tuple[int, int]] | None = None
        """id of a parameter → (its gradient's, its optimizer state's bytes) (memory runs)."""
        self.scope = scope
        self.sources = sources
        self._stats: dict[int, ModuleStats] = {}
        self._changed = False
        self._lock = threading.RLock()
        """Held while a call is recorded and while :meth:`drain` reads the tree, so the child's
        flusher thread never sends a call half-recorded (re-entrant: a read may run code
        that drains, as a test does)."""
        self._layout: Layout | None = None
        """(stats, path) in tree order; worked out again when a new module was called."""
        self._tensor: type = type(None)  # torch.Tensor, once torch is imported
        self._module: type = type(None)  # torch.nn.Module
        self._code: CodeType | None = None  # the code of a module call
        self._backend: ReturnWatch | None = None
        self._paces: Paces | None = None
        self._awake: list[ModuleStats] = []
        self._spell = 0
        """The modules called since the tree last woke, and how often it woke."""
        self._run = 0
        self._members = 0
        self._settled = 0
        """The current run of calls that brought nothing new (a new thing starts another),
        how many modules were called in it, how many of them :data:`QUIET_AFTER` times."""
        self._quiet = False
        self._checks_left = WAKE_AFTER_CHECKS
        self._waiting_for: ModuleStats | None = None
        """A module whose pace's running hit the last attempt to fall quiet waited for: a
        statement that runs a library's whole loop (``trainer.train()``) never ends its hit,
        and looking at every module called since the tree woke on each call was 30 µs a
        call of a 31-module GPT-2."""

    def install(self, backend: ReturnWatch, paces: Paces | None = None) -> None:
        """Record module calls through ``backend`` once torch is imported; with ``paces``,
        stop watching while nothing changes (see the module's docstring)."""

        def on_torch(torch: ModuleType) -> None:
            code = torch_compat.module_call_code(torch.nn.Module)
            if code is None:
                return  # a torch whose module calls we do not know how to see: no tree
            self._tensor = torch.Tensor
            self._module = torch.nn.Module
            self._code = code
            self._backend = backend
            self._paces = paces
            backend.watch_returns(code, self.returned, self.wake)
            if paces is not None:
                paces.on_news(self.wake)
                backend.check_calls(self.calling)

        when_imported("torch", on_torch)

    def returned(self, frame: FrameType, output: Any) -> None:
        """A ``Module._wrapped_call_impl`` frame returned ``output`` (a trace callback)."""
        with self._lock:
            self._record_call(frame, output)

    def _record_call(self, frame: FrameType, output: Any) -> None:
        local = frame.f_locals
        module = local.get("self")
        args = local.get("args")
        if module is None:
            return
        stats = self._stats.get(id(module))
        if stats is None:
            if len(self._stats) >= MAX_MODULES:
                return
            stats = self._stats[id(module)] = ModuleStats(module)
            self._layout = None
        if self._quiet:  # a call that began before the tree fell quiet: estimated already
            if observe_call(stats, args, output, self._tensor):
                self.wake()
            return
        if stats.spell != self._spell:
            self._first_call_since_waking(stats, frame)
        pace = stats.pace
        if pace is not None:
            hits, exits, line = pace
            tick = hits.get(line, 0) - exits.get(line, 0)
            if tick != stats.tick:
                stats.tick = tick
                stats.calls_before = stats.calls
                if tick == stats.paced_from:
                    stats.calls_from = stats.calls  # the first whole hit since waking
            if tick == stats.woke_at:
                stats.estimated -= 1  # estimated already
        stats.calls += 1
        new_run = observe_call(stats, args, output, self._tensor)
        self._changed = True
        if new_run:
            self._run += 1  # another run begins
            self._members = self._settled = 0
            return
        if stats.run != self._run:
            stats.run = self._run
            stats.run_calls = 0
            self._members += 1
        stats.run_calls += 1
        if stats.run_calls == QUIET_AFTER:
            self._settled += 1
        if self._settled == self._members and self._paces is not None:
            self._fall_quiet()

    def calling(self, callee: Any, first: Any) -> bool:
        """User code is about to call ``callee`` with ``first`` as its first argument: a quiet
        tree wakes (before the call runs) when ``callee`` is a module not seen yet or
        ``first`` a tensor new to it. Whether the call site calls a module (else it need not
        be checked again)."""
        stats = self._stats.get(id(callee))  # modules are held: no other object has their id
        if stats is None:
            if not isinstance(callee, self._module):
                return False
            self.wake()
        elif self._quiet:
            self._checks_left -= 1
            try:  # a trace callback: an odd tensor subclass must not raise into the program
                new = isinstance(first, self._tensor) and (
                    not stats.inputs or stats.inputs[0].would_be_new(first)
                )
            except Exception:
                new = True
            if new or not self._checks_left:
                self.wake()
        return True

    # -- quiet spells ----------------------------------------------------------------------
    def _first_call_since_waking(self, stats: ModuleStats, frame: FrameType) -> None:
        stats.spell = self._spell
        self._awake.append(stats)
        pace = None if self._paces is None else self._paces.pace_of(self._caller_of_root(frame))
        if pace is None:
            self._paces = None  # a module called from no user code: watch every call
            return
        if stats.pace is None or stats.pace[0] is not pace[0] or stats.pace[2] != pace[2]:
            stats.pace, stats.pace_calls, stats.pace_hits = pace, 0, 0  # paced anew
        tick = stats.tick = hits_of(pace)  # this call's hit is counted already
        stats.paced_from = tick + 1 if tick == stats.woke_at else tick
        stats.calls_from = stats.calls_before = stats.calls

    def _caller_of_root(self, frame: FrameType) -> FrameType | None:
        """The frame that called the outermost module call ``frame`` runs in: a block's
        calls are paced by the loop that calls the model, not by the model's own loop."""
        outermost = frame
        caller = frame.f_back
        while caller is not None:
            if caller.f_code is self._code:
                outermost = caller
            caller = caller.f_back
        return outermost.f_back

    def _fall_quiet(self) -> None:
        """Stop watching, once every module called since the tree woke was called in a hit
        of its pace that has ended (its calls per hit are counted over whole hits)."""
        waiting = self._waiting_for
        if waiting is not None and waiting.pace is not None:
            running = hits_of(waiting.pace)
            if running and running <= waiting.paced_from:
                return  # still within the hit it waited for: no need to look at them all
        now = {id(stats): hits_of(stats.pace) for stats in self._awake if stats.pace is not None}
        self._waiting_for = next(
            (s for s in self._awake if (hit := now.get(id(s))) and hit <= s.paced_from), None
        )
        if self._waiting_for is not None:
            return  # not yet: on a later call
        backend = self._backend
        if backend is None or not backend.pause_returns():
            self._paces = None  # this backend cannot stop (sys.settrace): count every call
            for stats in self._stats.values():
                stats.pace = None  # nothing to pace
            return
        self._quiet = True
        for stats in self._awake:
            if stats.pace is None:
                continue
            # Whole hits only: the calls before the running hit, over the hits before it.
            before = stats.calls_before if stats.tick == now[id(stats)] else stats.calls
            if stats.tick < stats.paced_from:
                before = stats.calls_from  # no call in a whole hit
            stats.pace_calls += before - stats.calls_from
            stats.pace_hits += now[id(stats)] - stats.paced_from
            # The running hit's calls to come are estimated with the spell's.
            stats.estimated -= stats.calls - before if stats.tick == now[id(stats)] else 0
        for stats in self._stats.values():  # also those not called lately: they may be again
            if stats.pace is not None and stats.pace_hits:
                stats.quiet_from = hits_of(stats.pace) - 1
        self._awake = []
        self._spell += 1
        self._run += 1
        self._members = self._settled = 0

    def wake(self) -> None:
        """Watch every call again (the backend re-armed its lines, or a user line read
        something new): the quiet spell's estimates are kept."""
        if not self._quiet:
            return
        self._quiet = False
        self._checks_left = WAKE_AFTER_CHECKS
        self._waiting_for = None
        for stats in self._stats.values():
            if stats.quiet_from is not None and stats.pace is not None:
                stats.estimated += estimated_since_quiet(stats)
                stats.quiet_from = None
                stats.woke_at = hits_of(stats.pace)
        if self._backend is not None:
            self._backend.resume_returns()

    def costs_changed(self) -> None:
        """A module's cost changed after its call (its backward ran): send the tree again."""
        self._changed = True

    # -- sending -------------------------------------------------------------------------
    def drain(self, *, last: bool = False) -> messages.Message | None:
        """The whole tree when a call happened since the last drain, else None. The ``last``
        one of a rank that may hold shards is sent anyway: FSDP2's parameters are shards
        again once its forward and backward are done, whenever the flushes before fell."""
        with self._lock:
            if last and torch_compat.sharding_possible():
                self._changed = True
            return self._tree()

    def _tree(self) -> messages.Message | None:
        if not self._changed and not self._quiet:
            return None
        self._changed = False
        try:
            layout = self._layout = self._layout or lay_out(self._stats)
            cost_of, kept_for = self.cost_of, self.kept_for
            return messages.modules(
                [
                    entry(stats, path, layout, self.sources, self.scope, cost_of, kept_for)
                    for stats, path in layout
                ]
            )
        except Exception:
            self._changed = True  # a module changed while we read it: next time
            return None
