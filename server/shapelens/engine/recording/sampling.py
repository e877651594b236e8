"""When a statement's values are read: its sampling schedule, one per statement, kept in
its code's :class:`~shapelens.engine.recording.code_info.CodeInfo` (``read_at``, the next hit
read; ``dense_until``, the hit its dense reads end). Hits are counted on every hit; reading
(the frame's locals, each tensor's metadata) is the costly part.

Every hit is read for the first :data:`DENSE_HITS` hits, then every :data:`SAMPLE_GAP`-th,
and again every hit for :data:`DENSE_HITS` hits after a read saw something new (a shape,
dtype, device or type). A value read before that varies clears every schedule
(:mod:`shapelens.engine.recording.news`). The same schedule samples what a statement stores
and what a ``return`` statement returns.
"""

from __future__ import annotations

import sys

from shapelens.engine.recording.code_info import CodeInfo
from shapelens.engine.switches import tuned

DENSE_HITS = tuned(64)
"""A statement's values are read on each of its first hits, and after a change, this many."""
NEWS_WINDOW = 8
"""Statements of a frame checked after a read in it saw something new."""
REARM_INTERVAL_S = 0.2
"""How often a backend that switches hot lines off (sys.monitoring, the 3.11 gate) switches
them on again, to look at them again."""
SAMPLE_GAP = 13
"""Past those, values that stay the same are read every this many hits (a prime: patterns
of any shorter period, such as alternating shapes, are still all seen)."""


def due(info: CodeInfo, line: int, hit: int) -> bool:
    """Whether the ``hit``-th hit of statement ``line`` is read."""
    return hit >= info.read_at.get(line, 0)


def read_news(info: CodeInfo, line: int, hit: int, *, every_hit: bool = False) -> None:
    """The ``hit``-th read of ``line`` saw something new: read densely from here (on every
    hit for good with ``every_hit``: a loop's batches, whose size may change on any)."""
    info.dense_until[line] = sys.maxsize if every_hit else hit + DENSE_HITS


def read_done(info: CodeInfo, line: int, hit: int) -> None:
    """The ``hit``-th hit of ``line`` was read: schedule the next read."""
    dense = hit < info.dense_until.get(line, DENSE_HITS)
    info.read_at[line] = hit + 1 if dense else hit + SAMPLE_GAP
