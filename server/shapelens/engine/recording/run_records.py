"""Aggregates observations per (file, line, variable) inside the child process.

Memory is bounded by lines × variables, never by iterations: each observation updates
one :class:`VarStats` in place. Raw metadata objects (``torch.Size``, ``torch.dtype``,
``torch.device``) are kept as they are and turned into strings only when flushed.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Sequence
from typing import Any

from shapelens.engine.recording import values
from shapelens.trace import messages

MAX_SHAPES = 8
HISTORY_POINTS = 32
"""A value's history keeps at most this many points: when full, every other one goes and
later reads are kept half as often (constant memory, the whole run's outline)."""

Message = dict[str, Any]


class VarStats:
    """Everything known about one variable name on one line."""

    __slots__ = (
        "bounded",
        "device",
        "dim_ranges",
        "dtype",
        "file",
        "grad_fn",
        "grad_varied",
        "history",
        "history_next",
        "history_stride",
        "hits",
        "is_argument",
        "line",
        "name",
        "ndim_varies",
        "next_nonfinite_check",
        "number",
        "ref",
        "requires_grad",
        "sent_hits",
        "shape",
        "shape_hits",
        "shape_index",
        "shape_since",
        "shapes",
        "sharding",
        "type",
    )

    def __init__(self, file: str, line: int, name: str, tp: type) -> None:
        self.file = file
        self.line = line
        self.name = name
        self.type = tp
        self.hits = 0
        self.sent_hits = 0
        self.shape: Any = None
        self.sharding: tuple[str, tuple[int, ...]] | None = None
        self.dtype: Any = None
        self.device: Any = None
        self.requires_grad: bool | None = None
        self.grad_fn: str | None = None
        self.shapes: list[Any] = []
        self.shape_hits: list[int] = []  # per distinct shape: hits before its latest run
        self.shape_index = -1  # the current shape's place in ``shapes`` (-1: not kept)
        self.shape_since = 0  # hits before the current shape's run began
        self.grad_varied = False  # requires_grad was True on some reads, False on others
        self.dim_ranges: list[list[int]] | None = None  # [min, max] per dim, over every read
        self.ndim_varies = False
        self.number: list[Any] | None = None  # a Python number's [last, min, max]
        self.history: list[float] = []  # scalars: a downsampled outline of the values read
        self.history_next = 0  # the hit at which the next point is kept
        self.history_stride = 1
        self.ref: Callable[[], Any] | None = None
        self.is_argument = False  # bound as a function argument (a def line)
        self.next_nonfinite_check = 1
        self.bounded: tuple[int, ...] = ()  # dims whose size is a bound (shape-only runs)

    def widen(self, shape: Any) -> None:
        """A new shape was read: every dim's range grows to include it (all shapes count,
        not only the first :data:`MAX_SHAPES` distinct ones)."""
        ranges = self.dim_ranges
        if ranges is None:
            if not self.ndim_varies:
                self.dim_ranges = [[int(d), int(d)] for d in shape]
            return
        if len(ranges) != len(shape):
            self.dim_ranges = None
            self.ndim_varies = True
            return
        for bounds, dim in zip(ranges, shape, strict=True):
            if dim < bounds[0]:
                bounds[0] = int(dim)
            elif dim > bounds[1]:
                bounds[1] = int(dim)

    def count_shape(self, index: int, hit: int) -> None:
        """The shape changed on ``hit`` to ``shapes[index]``: the run of the previous one
        ended on the hit before (counted per run of equal shapes, not per read)."""
        ended = hit - 1
        previous = self.shape_index
        if previous >= 0:
            self.shape_hits[previous] += ended - self.shape_since
        while len(self.shape_hits) < len(self.shapes):
            self.shape_hits.append(0)
        self.shape_index = index
        self.shape_since = ended

    def shape_counts(self, hits: int) -> list[int]:
        """Hits per distinct shape, ``hits`` (with estimates) ending the current run."""
        counts = list(self.shape_hits)
        if self.shape_index >= 0:
            counts[self.shape_index] += hits - self.shape_since
        return counts

    def note_number(self, value: float) -> None:
        """A Python number was read: the last one, and the range of every one read."""
        number = self.number
        if number is None:
            self.number = [value, value, value]
            return
        number[0] = value
        if value < number[1]:
            number[1] = value
        elif value > number[2]:
            number[2] = value

    def remember(self, value: float, hit: int) -> None:
        """A scalar was read on ``hit``: keep it when ``history_stride`` hits have passed
        since the last point kept (points evenly spaced in hits, not in reads); else the
        latest point becomes this value."""
        if hit < self.history_next:
            if self.history:
                self.history[-1] = value  # the last point is always the latest value read
            return
        self.history_next = hit + self.history_stride
        history = self.history
        history.append(value)
        if len(history) >= HISTORY_POINTS:
            del history[1::2]
            self.history_stride *= 2

    def to_message(self, hits: int) -> messages.VarRecord:
        return messages.VarRecord(
            file=self.file,
            line=self.line,
            name=self.name,
            type=values.type_name(self.type),
            shape=None if self.shape is None else [int(d) for d in self.shape],
            dtype=values.dtype_name(self.dtype),
            device=values.device_name(self.device),
            requires_grad=self.requires_grad,
            hits=hits,
            shapes=[[int(d) for d in s] for s in self.shapes],
            grad_fn=self.grad_fn,
            dim_ranges=None if self.dim_ranges is None else [list(b) for b in self.dim_ranges],
            number=None if self.number is None else [messages.json_number(v) for v in self.number],
            history=[messages.json_number(v) for v in self.history]
            if len(self.history) > 1
            else None,
            shape_hits=self.shape_counts(hits) if len(self.shapes) > 1 else None,
            grad_varied=self.grad_varied,
            bounded_dims=list(self.bounded) if self.bounded else None,
            sharding=None if self.sharding is None else [self.sharding[0], list(self.sharding[1])],
        )


class RunRecords:
    """All stats of one run, plus findings; hands out deltas for the channel.

    The program's threads record, and the child's flusher thread drains at any moment.
    Everything a flush reads is written under :attr:`lock`, which :meth:`drain` holds, except
    two counters: a line's hits (:meth:`hits_table`) and a record's ``hits`` on a hit whose
    values are not read. They are counted on every line event, too often for a lock, and
    each is one store of an int, which a flush reads whole; a count moving on alone leaves
    its record whole. So a record is never sent half-updated, whatever the thread switches.
    """

    def __init__(self, earlier: Sequence[VarStats] = ()) -> None:
        """``earlier``: what earlier recordings in this process saw bound (a notebook's
        previous cells), so a tensor made there still has its birth line."""
        self.earlier = tuple(earlier)
        self.lock = threading.RLock()
        """Held while values are read into records (by the event handlers) and while
        :meth:`drain` reads them. Re-entrant: a read adds records and findings, which lock
        for callers outside a read."""
        # Per file: line -> hit count. Per file: line -> {name: VarStats}.
        self.line_hits: dict[str, dict[int, int]] = {}
        self.var_stats: dict[str, dict[int, dict[str, VarStats]]] = {}
        self.all_stats: list[VarStats] = []  # creation order: used to find where a tensor was born
        self.findings: list[Message] = []
        self.sampled: dict[str, set[int]] = {}
        """Lines whose events were switched off after enough hits: counts are lower bounds."""
        self.compile_mode: str | None = None
        """How the program's torch.compile regions ran: "eager", "compiled", or never."""
        self.loop_exits: dict[str, dict[int, int]] = {}
        self.estimates: dict[tuple[str, int], Estimate] = {}
        """Lines whose events are switched off now: their hits are extrapolated."""
        self._sent_sampled = 0
        self._sent_line_hits: dict[tuple[str, int], int] = {}
        self._sent_findings = 0
        self._sent_compile_mode: str | None = None
        self.fault: str | None = None
        """Why tracing stopped early: an error of ours in a tracing callback (the first)."""
        self._fault_sent = False

    # -- building blocks handed to the tracer -------------------------------------------
    def hits_table(self, file: str) -> dict[int, int]:
        return self.line_hits.setdefault(file, {})

    def stats_table(self, file: str) -> dict[int, dict[str, VarStats]]:
        return self.var_stats.setdefault(file, {})

    def new_stats(self, file: str, line: int, name: str, tp: type) -> VarStats:
        stats = VarStats(file, line, name, tp)
        with self.lock:
            self.all_stats.append(stats)
        return stats

    def mark_sampled(self, file: str, line: int) -> None:
        with self.lock:
            self.sampled.setdefault(file, set()).add(line)

    def note_fault(self, text: str) -> None:
        """Tracing stopped: an error of ours (``text``) in a callback; the first one is kept."""
        with self.lock:
            if self.fault is None:
                self.fault = text

    def add_finding(self, finding: Message) -> None:
        with self.lock:
            self.findings.append(finding)

    def has_finding(self, kind: str, file: str, line: int) -> bool:
        return any(
            f["kind"] == kind and f["file"] == file and f["line"] == line for f in self.findings
        )

    def loop_exits_table(self, file: str) -> dict[int, int]:
        """Per file: loop header line -> how many times its loop was left from the header
        (the header's last hit of each entry into the loop, which runs no body)."""
        return self.loop_exits.setdefault(file, {})

    def switch_off(self, file: str, line: int, counter: int) -> None:
        """``line`` stops being reported: estimate its hits from ``counter``'s (same file)."""
        hits = self.line_hits[file]
        exits = self.loop_exits_table(file)
        with self.lock:
            self.estimates[(file, line)] = Estimate(hits, exits, line, counter)
            self.mark_sampled(file, line)

    def hits_now(self, file: str, line: int) -> int:
        """``line``'s hits so far: counted, or extrapolated while it is switched off."""
        with self.lock:
            estimate = self.estimates.get((file, line))
            counted = self.line_hits.get(file, {}).get(line, 0)
            return counted + (estimate.extra() if estimate is not None else 0)

    def switch_on(self, file: str, line: int) -> int:
        """``line`` is reported again: its hits (and its variables') become the estimate,
        which exact counting continues from. Returns the line's hit count."""
        with self.lock:  # the estimate moves into the counts: a flush sees one or the other
            estimate = self.estimates.pop((file, line), None)
            hits = self.line_hits[file]
            if estimate is None:
                return hits.get(line, 0)
            extra = max(estimate.extra() - 1, 0)  # this hit, in the estimate, is counted next
            for stats in self.var_stats.get(file, {}).get(line, {}).values():
                if _estimated(stats.name):
                    stats.hits += extra
            hits[line] = hits.get(line, 0) + extra
            return hits[line]

    # -- origins -------------------------------------------------------------------------
    def origin_of(self, value: Any) -> VarStats | None:
        """The first line that bound this very object (where it was created, as far as we saw)."""
        fallback: VarStats | None = None
        for stats in (*self.earlier, *self.all_stats) if self.earlier else self.all_stats:
            ref = stats.ref
            if ref is not None and ref() is value:
                if not stats.is_argument:
                    return stats
                fallback = fallback or stats
        return fallback

    # -- flushing ------------------------------------------------------------------------
    def drain(self, *, last: bool = False) -> list[messages.Message]:
        """Channel messages describing everything that changed since the last drain. A record
        changed when its hits did, or, on the ``last`` drain of a run, maybe without: a frame's
        end reads the last values of lines skipped since their last read, counting no hit."""
        with self.lock:
            return self._changes(last)

    def _changes(self, last: bool) -> list[messages.Message]:
        out: list[messages.Message] = []
        lines: list[messages.LineRecord] = []
        extra = {key: estimate.extra() for key, estimate in self.estimates.items()}
        # Copies (one C call each): the counters' tables gain lines without the lock.
        for file, table in list(self.line_hits.items()):
            for line, hits in table.copy().items():
                key = (file, line)
                hits += extra.get(key, 0)
                if self._sent_line_hits.get(key) != hits:
                    self._sent_line_hits[key] = hits
                    lines.append(messages.LineRecord(file, line, hits))
        if lines:
            out.append(messages.lines(lines))
        changed: list[messages.VarRecord] = []
        for stats in self.all_stats:
            hits = stats.hits
            if extra and _estimated(stats.name):
                hits += extra.get((stats.file, stats.line), 0)
            if (last or hits != stats.sent_hits) and hits > 0:
                stats.sent_hits = hits
                try:
                    changed.append(stats.to_message(hits))
                except Exception:  # an odd shape (a dim of None): left out, tried next time
                    stats.sent_hits = 0
        if changed:
            out.append(messages.vars_(changed))
        entries = [
            messages.SampledRecord(file, line)
            for file, marked in self.sampled.items()
            for line in marked
        ]
        if len(entries) != self._sent_sampled:
            self._sent_sampled = len(entries)
            out.append(messages.sampled(entries))
        if len(self.findings) > self._sent_findings:
            new = self.findings[self._sent_findings :]
            self._sent_findings = len(self.findings)
            out.append(messages.findings(new))
        if self.compile_mode != self._sent_compile_mode:
            self._sent_compile_mode = self.compile_mode
            out.append(messages.compile_mode(self.compile_mode))
        if self.fault is not None and not self._fault_sent:
            self._fault_sent = True
            out.append(messages.fault(self.fault))
        return out


class Estimate:
    """The hits a switched-off line has made since, extrapolated from its counter line (its
    loop's header, or its function's calls, both still counted exactly) at the rate the two
    went at while both were counted."""

    __slots__ = ("counter", "counter_base", "exits", "hits", "rate")

    def __init__(self, hits: dict[int, int], exits: dict[int, int], line: int, counter: int):
        self.hits = hits
        self.exits = exits
        self.counter = counter
        self.counter_base = self._paced()
        # The switch comes on a hit, and the counter's first pass usually was one too (a
        # line run every k-th pass from the first, `if step % k == 0`): measured between
        # the two, the rate is exact for it; hits / passes overshoots by ~1/hits (1.5 %
        # at the switch, carried by every estimate after it).
        self.rate = max(hits.get(line, 0) - 1, 0) / max(self.counter_base - 1, 1)

    def _paced(self) -> int:
        """The counter's hits that ran the body: a loop header's exits ran none."""
        return self.hits.get(self.counter, 0) - self.exits.get(self.counter, 0)

    def extra(self) -> int:
        return round(self.rate * (self._paced() - self.counter_base))


def _estimated(name: str) -> bool:
    """Whether a switched-off line's estimate counts ``name`` too: what it stores, and what
    a ``return`` statement returns (once a hit); not a ``yield``'s value, counted by its
    events (a generator resumes at the statement it yielded on)."""
    return name[0] != "<" or name.startswith("<return>")


def weak(value: Any) -> Callable[[], Any] | None:
    try:
        return weakref.ref(value)
    except TypeError:
        return None
