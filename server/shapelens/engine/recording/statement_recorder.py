"""The statement recorder, driven by both tracing backends (``sys.settrace`` in
:mod:`shapelens.engine.backends.settrace`, ``sys.monitoring`` in
:mod:`shapelens.engine.backends.monitoring`).

A backend follows each frame of user code and reports what happens to it: a call started
(:meth:`StatementRecorder.enter_call`), a statement started
(:meth:`StatementRecorder.statement_started`, called only when the frame moves to another
statement), the frame returned or yielded (:meth:`StatementRecorder.frame_returned`), an
exception was raised in it (:meth:`StatementRecorder.exception_raised`). When a statement is
over, the names it stored are read from the frame and their metadata recorded on its line:
only stored names are read, so the cost per event does not grow with the number of locals or
iterations (the reading itself: :mod:`shapelens.engine.recording.reading`). What the rules
need of the running program is handed on as events (:mod:`shapelens.engine.findings.events`:
a statement checked, an operator or a call that ran, values that changed, a commented
statement that ended, a non-finite value read, an exception, a warning) to the rules that
subscribed to them (:class:`~shapelens.engine.findings.dispatch.Dispatcher`), so both
backends observe the same things; the recorder records their findings and knows no rule.

Hits are always counted exactly. Reading values (the costly part: the frame's locals and
each tensor's metadata) is sampled per statement (:mod:`shapelens.engine.recording.sampling`).
A statement skipped since its last read, whose names no other statement stores, is read once
more when its frame ends, so a loop's last value (the smaller final batch) is seen.
"""

from __future__ import annotations

import os
import sys
from types import CodeType, FrameType, TracebackType
from typing import Any

from shapelens.engine.findings import collate
from shapelens.engine.findings.context import RunFacts
from shapelens.engine.findings.dispatch import Dispatcher
from shapelens.engine.findings.events import (
    CallFailed,
    CallRan,
    CommentedStatementEnded,
    NonfiniteRead,
    OperatorRan,
    Raised,
    StatementChecked,
    ValuesChanged,
    Warned,
)
from shapelens.engine.findings.op_watch import Called, OpWatch
from shapelens.engine.findings.replay import Replay, names_tensors
from shapelens.engine.findings.warning_listener import WarningListener, warned_from
from shapelens.engine.recording.code_info import NO_STATEMENT, CodeInfo
from shapelens.engine.recording.line_switches import LineSwitches
from shapelens.engine.recording.news import News
from shapelens.engine.recording.reading import Reader, holds_tensors
from shapelens.engine.recording.run_records import RunRecords, VarStats
from shapelens.engine.recording.sampling import DENSE_HITS, NEWS_WINDOW, due, read_done, read_news
from shapelens.engine.recording.scope import UserCodeScope
from shapelens.engine.recording.statement_hooks import add_hit, iteration_hook, statement_hook
from shapelens.engine.source.source_map import SourceMaps
from shapelens.trace.finding import Finding, finding_to_json, with_hit

__all__ = ["NO_STATEMENT", "CodeInfo", "StatementRecorder"]

_MISSING = object()
_CollateLater = tuple[tuple[int, type], FrameType, CodeInfo, int, collate.FailedBatch]


class StatementRecorder:
    """Records per-line tensor metadata of user code into a :class:`RunRecords`, from the
    frame events a tracing backend reports."""

    def __init__(
        self,
        *,
        scope: UserCodeScope,
        records: RunRecords,
        sources: SourceMaps,
        dispatch: Dispatcher,
        facts: RunFacts,
    ) -> None:
        self.scope = scope
        self.records = records
        self.lines = LineSwitches(records)
        """Which hot lines the backend stops (sys.monitoring, the 3.11 gate)."""
        self.sources = sources
        self.dispatch = dispatch
        self.codes: dict[int, CodeInfo | None] = {}
        """``id(code)`` → what we know of the code object (None: not user code), read inline by
        backends on their hottest events. By id: hashing a code hashes its bytecode and
        constants (up to 4 µs for a torch function on 3.12); codes are kept, ids not reused."""
        self._seen_codes: list[CodeType] = []
        self.op_watch = OpWatch(self._on_op, self.known)
        # What the rules want decides what is watched, once: events nobody wants are never made.
        self._watch_calls = dispatch.watches("calls")
        """Whether every checked statement is watched (a failing call explained, its calls)."""
        self._watch_operators = dispatch.watches("operators")
        """Whether the elementwise operators of checked statements are watched."""
        self._checks = dispatch.wants(StatementChecked)
        self._calls_ran = dispatch.wants(CallRan)
        self._comments = dispatch.wants(CommentedStatementEnded)
        self._changes = dispatch.wants(ValuesChanged)
        self.provenance = facts.provenance
        if self._watch_calls:
            self.op_watch.on_call = self._on_call
        self.reader = Reader(records)
        self._read_names = self.reader.read_names
        self._scan = facts.scan
        self.replay: Replay | None = None
        """Replays of failing statements (the engine's choice: where fake tensors, the memory
        watch and compiled regions do not run)."""
        self.worker_batches: collate.WorkerBatches | None = None  # the engine's, with replays
        if dispatch.wants(NonfiniteRead):
            self.reader.check_value = self._value_read
        self._last_exception: tuple[int, type] | None = None
        self._pending_errors: list[tuple[tuple[int, type], list[Finding]]] = []
        self._replay_later: tuple[tuple[int, type], FrameType, CodeInfo, int, bool] | None = None
        """The latest failure replayed (or seen, the bool) while the program ran: from its
        callers if the run ends with it (the frames live on in the traceback)."""
        self._collate_later: _CollateLater | None = None
        """The latest batch a DataLoader's collate failed on (here or in a worker), unseen by the
        op watch: collated again if the run ends with that error (:mod:`~..findings.collate`)."""
        self._warnings = WarningListener(self._on_warning)
        self._op_statements: dict[int, tuple[CodeInfo, int, dict[str, int]]] = {}
        """Frames whose statement the op watch follows: (code, statement, ops seen per op)."""
        self.news = News()
        self.on_news = self.news.on_news  # who is told of news (:mod:`.news`)
        self._news_window: dict[int, int] = {}
        """Frames whose next statements are checked: a read there just saw something new."""
        self.statement_started = statement_hook(
            watched=self._op_statements,
            end_watch=self._end_op_statement,
            read=self._read,
            check=self._check_statement,
            news_window=self._news_window,
            probe_loss=self.reader.probe_loss,
        )
        self.loop_iterated = iteration_hook(self._read)

    # -- code objects ------------------------------------------------------------------
    def info_for(self, code: CodeType) -> CodeInfo | None:
        """What we know about ``code``, or ``None`` when it is not user code (cached)."""
        info = self.codes.get(id(code), _MISSING)
        if info is _MISSING:
            info = self._remember(code, self.describe(code))
        return info  # type: ignore[return-value]

    def _remember(self, code: CodeType, info: CodeInfo | None) -> CodeInfo | None:
        self._seen_codes.append(code)  # alive as long as its id is a key
        # Threads may describe the same code at once: the first one stored is everyone's.
        return self.codes.setdefault(id(code), info)

    def known(self, code: CodeType) -> CodeInfo | None:
        """Like :meth:`info_for`, without describing new code (for hot global events)."""
        return self.codes.get(id(code))

    def describe(self, code: CodeType) -> CodeInfo | None:
        """``code`` analysed, or ``None`` when it is not user code (not cached)."""
        file = self.scope.user_file(code.co_filename)
        if file is None or not self.scope.wants_code(code):
            return None
        return self._code_info(code, file)

    def info_unscoped(self, code: CodeType) -> CodeInfo | None:
        """What we know about ``code`` of any file, the scope not consulted (a frame another
        tracer chose: snoop's targets); ``None`` for code without a file (``<string>``)."""
        info = self.codes.get(id(code))
        if info is None:
            if code.co_filename.startswith("<"):
                return None
            info = self._code_info(code, os.path.realpath(code.co_filename))
            if info is None:
                return None
            self._remember(code, info)
        return info

    def _code_info(self, code: CodeType, file: str) -> CodeInfo | None:
        try:
            return CodeInfo(code, file, self.sources.get(file), self.records)
        except Exception:
            return None  # code we cannot analyse is left untraced, never an error

    # -- frame events (what a backend reports) -----------------------------------------
    def enter_call(self, frame: FrameType, info: CodeInfo) -> None:
        """A fresh call of user code: count the def line, record the arguments."""
        if self._op_statements:
            self.op_watch.pause()
        if info.is_module:
            return
        calls = add_hit(info.hits, info.def_line)
        if info.arg_names:
            self._read(frame, info, info.def_line, info.arg_names, calls, arguments=True)

    def frame_returned(
        self, frame: FrameType, info: CodeInfo, previous: int, value: Any, *, yielded: bool
    ) -> None:
        """``frame`` returned ``value`` (or yielded it, and will resume at the same statement)
        while running statement ``previous``."""
        watched = bool(self._op_statements)
        if watched:
            self._end_op_statement(frame)
        if self._news_window:
            self._news_window.pop(id(frame), None)
        if not yielded and previous in info.loop_headers:
            add_hit(info.loop_exits, previous)
        if not yielded and previous in info.stores:
            self._read(frame, info, previous, info.stores[previous], info.hits.get(previous, 0))
        if (
            not yielded
            and (info.stale or info.switched_off)
            and (info.is_module or self._rarely_called(info))
        ):
            self._read_last_values(frame, info)
        if value is not None and previous != NO_STATEMENT:
            line = frame.f_lineno
            statement = info.statement_of.get(line, line)
            self._read_returned(frame, info, statement, value, yielded)
        if watched:  # after the reads: what they run (a NaN's origin search) is not watched
            self.op_watch.resume(frame.f_back)

    def exception_raised(
        self,
        frame: FrameType,
        info: CodeInfo,
        exc: BaseException | None,
        tb: TracebackType | None = None,
    ) -> None:
        """``exc`` was raised in ``frame`` (or passes through it, traceback ``tb`` when the
        backend has it): its running statement did not complete. Explains a shape or dtype
        error, reported if the run ends with it."""
        failed = self.op_watch.failure_in(frame, exc, tb) if exc is not None else None
        if self._op_statements:
            self._end_op_statement(frame)
        # Exceptions can't be weakly referenced and a strong reference would keep their
        # frames alive, so they are recognised by id and type.
        key = (id(exc), type(exc))
        if exc is None or key == self._last_exception:
            return  # already seen in a more inner frame of user code
        self._last_exception = key
        line = info.statement_of.get(frame.f_lineno, frame.f_lineno)
        found: list[Finding] = []
        # A batch the user's loop asked for, refused by the DataLoader's collate function.
        collated = collate.collated_in(exc, tb)
        if failed is not None:  # the call itself was seen: explained by what it was passed
            seen = CallFailed(exc=exc, failed=failed, info=info, line=line, collated=collated)
            found = self.dispatch.emit(seen)
            if self.replay is not None and found and not any(f.chain for f in found):
                # Seen on a hit checked for its own sake, where the statements that made its
                # operands were not: a replay from the caller may see the way back.
                self._replay_later = (key, frame, info, line, True)
        elif (batch := collate.failed_batch(collated, self.worker_batches, exc, tb)) is not None:
            if self.replay is not None:  # where a replay may run, after the program
                self._collate_later = (key, frame, info, line, batch)
        elif self.replay is not None and names_tensors(info, line, frame):
            found = self._replayed(frame, info, line, exc)
            self._replay_later = (key, frame, info, line, False)
        if not found:  # no call seen, even replayed: the values the statement names
            found = self.dispatch.emit(Raised(exc=exc, frame=frame, info=info, line=line, tb=tb))
        if found:
            found = self._at_hit(found, info, line)
            self._pending_errors = [*self._pending_errors[-7:], (key, found)]

    def _at_hit(self, found: list[Finding], info: CodeInfo, line: int) -> list[Finding]:
        """The findings on the failing line, with the hit it failed on (a loop's iteration)."""
        hit = self.records.hits_now(info.file, line) - info.loop_exits.get(line, 0)
        return with_hit(found, info.file, line, hit) if hit > 0 else found

    def _replayed(
        self,
        frame: FrameType,
        info: CodeInfo,
        line: int,
        exc: BaseException,
        *,
        outer: bool = False,
    ) -> list[Finding]:
        """The failing call of a hit the op watch did not follow, seen by running the
        statement (``outer``: a caller's) again on fake copies
        (:mod:`~shapelens.engine.findings.replay`)."""
        assert self.replay is not None
        run = self.replay.run_outer if outer else self.replay.run
        replayed = run(frame, info, line, exc)
        if replayed is None:
            return []
        seen = CallFailed(
            exc=exc, failed=replayed.failed, info=info, line=line,
            provenance=replayed.provenance, origin_of=replayed.origin_of,
        )  # fmt: skip
        return self.dispatch.emit(seen)

    def pace_of(self, frame: FrameType | None) -> tuple[dict[int, int], dict[int, int], int] | None:
        """What paces a call made by ``frame``: the statement that counts the hits (its
        loop header or def line, else itself) of the one the innermost user frame runs: its
        hit and loop-exit tables and line, exact on both backends (never switched off)."""
        codes = self.codes
        while frame is not None:
            info = codes.get(id(frame.f_code))
            if info is not None:
                statement = info.statement_of.get(frame.f_lineno, frame.f_lineno)
                return info.hits, info.loop_exits, info.counter_of.get(statement, statement)
            frame = frame.f_back
        return None

    def conclude(self, exc: BaseException | None) -> None:
        """The run ended with ``exc``: report the mismatch finding it caused, if any."""
        later, self._replay_later = self._replay_later, None
        batch_later, self._collate_later = self._collate_later, None
        ended = None if exc is None else (id(exc), type(exc))
        found = [f for key, f in self._pending_errors if key == ended]
        self._pending_errors = []
        if exc is not None and batch_later is not None and batch_later[0] == ended:
            _, frame, info, line, batch = batch_later
            again = collate.collated_again(batch, exc, frame)
            if again is not None:  # a worker's batch: the error explained is the worker's
                failed, collated, error = again
                seen = CallFailed(exc=error, failed=failed, info=info, line=line, collated=collated)
                found = [self._at_hit(self.dispatch.emit(seen), info, line), *found]
        if exc is not None and later is not None and later[0] == ended:  # the whole way back
            _, frame, info, line, seen_directly = later
            outer = self._at_hit(self._replayed(frame, info, line, exc, outer=True), info, line)
            if not seen_directly or any(f.chain for f in outer):
                found = [outer, *found]  # a call seen directly is kept unless this adds a chain
        for candidate in found:
            if candidate:
                self._add(candidate)
                return

    # -- library warnings (both backends) ----------------------------------------------
    def start_listening(self) -> None:
        """Place library warnings (torch's) on the user's line; call when tracing starts."""
        if self.dispatch.wants(Warned):
            self._warnings.start()

    def stop_listening(self) -> None:
        self._warnings.stop()

    # -- sampling ----------------------------------------------------------------------
    def _read(
        self,
        frame: FrameType,
        info: CodeInfo,
        line: int,
        names: tuple[str, ...],
        hit: int,
        *,
        arguments: bool = False,
    ) -> None:
        """Statement ``line`` completed its ``hit``-th hit: read what it stored, or only count
        it when this hit is not sampled."""
        if not due(info, line, hit):  # its losses are probed by statement_started
            table = info.stats.get(line)
            if table:
                for name, stats in table.items():
                    if name[0] != "<":  # not a <return>/<yield> recorded on the line
                        stats.hits += 1
            info.stale.add(line)
            return
        info.stale.discard(line)
        if self._read_names(frame, info, line, names, arguments):
            # A loop's batches are read on every hit: the one whose size varies shows where.
            batches = line in info.loop_headers and holds_tensors(info.stats.get(line))
            read_news(info, line, hit, every_hit=batches)
            self._news_window[id(frame)] = NEWS_WINDOW
            self._values_changed(info, line)
            self.news.seen(self.codes.values(), varied=self.reader.take_varied())
        read_done(info, line, hit)
        if line in info.shape_comments:
            self._check_comment(frame, info, line, names, arguments=arguments)

    def _read_returned(
        self, frame: FrameType, info: CodeInfo, statement: int, value: Any, yielded: bool
    ) -> None:
        """Returned on its statement's schedule (``__getitem__`` returns thousands of times an
        epoch), else counted; yielded, or by a statement that stores, read on every hit."""
        hit = info.hits.get(statement, 0)
        own = not yielded and statement not in info.stores
        if own and not due(info, statement, hit):
            if statement not in info.switched_off:  # else its line's estimate counts it
                for name, stats in info.stats.get(statement, {}).items():
                    stats.hits += name.startswith("<return>")
            return
        name = "<yield>" if yielded else "<return>"
        if self.reader.read_returned(info, statement, name, value, frame) and own:
            read_news(info, statement, hit)
            self.news.seen(self.codes.values(), varied=self.reader.take_varied())
        if own:
            read_done(info, statement, hit)
        if not yielded and statement in info.shape_comments:
            self._check_comment(frame, info, statement, (), returned=value)

    def _rarely_called(self, info: CodeInfo) -> bool:
        return info.hits.get(info.def_line, 0) <= DENSE_HITS

    def _read_last_values(self, frame: FrameType, info: CodeInfo) -> None:
        """The frame ends: read the last values of the statements skipped since their last
        read, where no other statement stores the same names (hits are counted already)."""
        unread = (info.stale | info.switched_off.keys()) & info.unique_stores
        for line in unread:
            info.stale.discard(line)
            if self._read_names(frame, info, line, info.stores[line], False, counted=True):
                self._values_changed(info, line)

    # -- findings: the events rules subscribed to, and their findings recorded ---------
    def _add(self, found: list[Finding]) -> None:
        for finding in found:
            self.records.add_finding(finding_to_json(finding))

    def _value_read(
        self, stats: VarStats, value: Any, kind: int, frame: FrameType | None, info: CodeInfo | None
    ) -> bool:
        """A value was just read (on its hits 1, 2, 4, ...): whether it holds NaN or Inf."""
        state = self._scan.state(value, kind)
        if state is None:
            return False
        seen = NonfiniteRead(stats=stats, value=value, state=state, frame=frame, info=info)
        self._add(self.dispatch.emit(seen))
        if not self.dispatch.wants(NonfiniteRead):
            self.reader.check_value = None  # the rules that look for them are done
        return True

    def _check_statement(self, frame: FrameType, info: CodeInfo, line: int) -> None:
        """A checked hit of ``line`` starts: hand it on (broadcasts by name), and watch the
        torch calls it makes (operands of elementwise ops, a call that fails)."""
        if self._checks:
            self._add(self.dispatch.emit(StatementChecked(frame=frame, info=info, line=line)))
        watch = self._watch_calls or (
            self._watch_operators and line in info.broadcast_lines and line in info.op_sites
        )
        if watch and self.op_watch.begin(frame):
            self._op_statements[id(frame)] = (info, line, {})

    def _end_op_statement(self, frame: FrameType) -> None:
        """The watched statement of ``frame`` is over (next statement, return, raise)."""
        if self._op_statements.pop(id(frame), None) is not None:
            self.op_watch.end(frame)

    def _on_op(self, frame: FrameType, op: str, left: Any, right: Any, result: Any) -> None:
        """An elementwise torch op, called by a watched statement, with its real operands."""
        entry = self._op_statements.get(id(frame))
        if entry is None or not self._watch_operators:
            return
        info, line, counts = entry
        if line not in info.broadcast_lines:
            return  # a finding there already
        sites = [site for site in info.op_sites.get(line, ()) if site.op == op]
        if not sites:
            return
        index = counts.get(op, 0)
        counts[op] = index + 1
        site = sites[min(index, len(sites) - 1)]  # the statement's n-th op of this operator
        seen = OperatorRan(info=info, line=line, site=site, left=left, right=right, result=result)
        self._add(self.dispatch.emit(seen))

    def _on_call(self, called: Called) -> None:
        """A torch call of a watched statement ran: hand it on, and remember where its
        results came from (the chains of failed calls)."""
        entry = self._op_statements.get(id(called.frame))
        if entry is None:
            return
        info, line, counts = entry
        if self._calls_ran:
            seen = CallRan(called=called, info=info, line=line, counts=counts)
            self._add(self.dispatch.emit(seen))
        expression = info.source.statement_text(line)
        for result in called.results[:4]:
            self.provenance.record(
                file=info.file, line=line, expression=expression or None, op=called.op,
                inputs=called.inputs, result=result,
            )  # fmt: skip

    def _check_comment(
        self,
        frame: FrameType,
        info: CodeInfo,
        line: int,
        stored: tuple[str, ...],
        *,
        returned: Any = None,
        arguments: bool = False,
    ) -> None:
        """A read hit of a statement with a shape comment is over: hand it on."""
        if not self._comments:
            return
        seen = CommentedStatementEnded(
            frame=frame, info=info, line=line, comment=info.shape_comments[line],
            stored=stored, returned=returned, arguments=arguments,
        )  # fmt: skip
        self._add(self.dispatch.emit(seen))

    def _values_changed(self, info: CodeInfo, line: int) -> None:
        if self._changes:
            self._add(self.dispatch.emit(ValuesChanged(info=info, line=line)))

    def _on_warning(self, message: str, category: type, filename: str) -> None:
        """A warning is being shown: place it on the innermost user line that is running."""
        found = warned_from(sys._getframe(1), self.known)
        if found is not None:
            frame, info, issued_here = found
            seen = Warned(
                message=message, category=category, frame=frame, info=info,
                issued_here=issued_here, filename=filename,
            )  # fmt: skip
            self._add(self.dispatch.emit(seen))
