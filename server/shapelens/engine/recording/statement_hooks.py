"""The two hooks a backend calls on nearly every line event: closures over plain dicts and
bound methods, reading no attribute of an object, as cheap as Python allows. What they do
is the statement recorder's (:mod:`shapelens.engine.recording.statement_recorder`)."""

from __future__ import annotations

from collections.abc import Callable
from types import FrameType
from typing import Any

from shapelens.engine.recording.code_info import CodeInfo
from shapelens.engine.switches import tuned

Read = Callable[[FrameType, CodeInfo, int, tuple[str, ...], int], None]
"""(frame, code, statement, names it stored, its hit): read or count what it stored"""
FIRST_CHECKED = tuned(4)
"""A statement is checked (broadcasts, the op watch) on each of its first hits (a module
class used several times in one forward), then on hits 8, 16, 32, …"""


def add_hit(table: dict[int, int], key: int) -> int:
    """``table[key] += 1``, and the count now. In place, not ``table.get(key, 0) + 1``: the
    interpreter may switch threads after a call returns, and another thread's hit counted
    between this one's read and write would be lost (half a line's hits, four threads in
    one function on a busy machine). The two hooks below do the same inline."""
    try:
        table[key] += 1
    except KeyError:
        table[key] = 1
    return table[key]


def statement_hook(
    *,
    watched: dict[int, Any],
    end_watch: Callable[[FrameType], None],
    read: Read,
    check: Callable[[FrameType, CodeInfo, int], None],
    news_window: dict[int, int],
    probe_loss: Callable[[FrameType, CodeInfo, int], None],
) -> Callable[[FrameType, CodeInfo, int, int], int]:
    """``statement_started(frame, info, previous, statement)``: ``frame`` moved from
    statement ``previous`` (maybe :data:`NO_STATEMENT`) to another, ``statement``: record
    what ``previous`` stored, count the hit, check broadcasts. Returns the statement's hit
    count (0 for a def or class line, which counts calls). Backends call it on nearly
    every line event, so it is a closure that reads no attributes of ``self``."""

    def statement_started(frame: FrameType, info: CodeInfo, previous: int, statement: int) -> int:
        if watched:
            end_watch(frame)
        hits = info.hits
        stores = info.stores
        if previous in stores:
            hit = hits.get(previous, 0)
            # _read's unread branch, inline: this runs on nearly every line event.
            if hit < info.read_at.get(previous, 0):  # not sampled: only count it
                table = info.stats.get(previous)
                if table:
                    for name, stats in table.items():
                        if name[0] != "<":  # not a <return>/<yield> recorded on the line
                            stats.hits += 1
                info.stale.add(previous)
                if previous in info.loss_lines:  # read in full on the hit it turns NaN
                    probe_loss(frame, info, previous)
            else:
                read(frame, info, previous, stores[previous], hit)
        if (
            previous in info.loop_headers
            and previous != statement  # header to header: the next iteration
            and info.counter_of.get(statement) != previous
        ):
            add_hit(info.loop_exits, previous)  # the header's hit was the loop's end
        if statement in info.definitions:
            return 0
        try:  # add_hit, inline: no thread switch between the read and the write
            hits[statement] += 1
        except KeyError:
            hits[statement] = 1
        count = hits[statement]
        # Checked on hits 1 to 4, then 8, 16, ...: shapes rarely change elsewhere; and
        # on the few statements after a read saw a new shape (the last, smaller batch).
        checked = count <= FIRST_CHECKED or not count & (count - 1)
        if news_window and id(frame) in news_window:
            checked = True
            left = news_window[id(frame)] = news_window[id(frame)] - 1
            if left <= 0:
                del news_window[id(frame)]
        if checked and statement in info.checked_lines:
            check(frame, info, statement)
        return count

    return statement_started


def iteration_hook(read: Read) -> Callable[[FrameType, CodeInfo, int], None]:
    """``loop_iterated(frame, info, header)``: the loop ``header`` ran again right after
    itself (its body's line events are switched off): count the hit, and let ``_read``
    read or count what the header stored (the loop variable) on its last hit."""

    def loop_iterated(frame: FrameType, info: CodeInfo, header: int) -> None:
        hits = info.hits
        try:  # add_hit, inline: no thread switch between the read and the write
            hits[header] += 1
        except KeyError:
            hits[header] = 1
        hit = hits[header] - 1
        names = info.stores.get(header)
        if names is not None:
            read(frame, info, header, names, hit)

    return loop_iterated
