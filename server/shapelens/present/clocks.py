"""Clock readings: ``t0 = time.time()`` on every step of a training loop.

Their range (``1.796e+09‥1.796e+09``: two dates a minute apart) and their course (a ramp:
time passes) say nothing, so hints leave them out. A duration (``dt = time.time() - t0``)
is not a reading: how long each step took, and that the first one was slow, is news.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from itertools import pairwise

_CLOCKS = frozenset({
    "time", "perf_counter", "monotonic", "process_time", "thread_time", "default_timer",
    "time_ns", "perf_counter_ns", "monotonic_ns", "process_time_ns", "thread_time_ns",
})  # fmt: skip
"""``time``'s clocks and ``timeit.default_timer``, called bare or through their module."""
_CLOCK_MODULES = frozenset({"time", "timeit"})

_EPOCH_SECONDS = (1e9, 4.1e9)
"""Seconds since 1970 from 2001 to 2099: what ``time.time()`` reads today."""


def is_clock_reading(
    statement: str | None, name: str, number: tuple[float, float, float], history: Sequence[float]
) -> bool:
    """Whether ``name``, bound by ``statement``, holds a clock's readings: the statement
    calls a clock and binds its result as it is; or, where the source does not say (``t0 =
    t1``), the values are epoch seconds that only grew. A learning-rate warmup or a step
    counter grows too, but is not a date."""
    if statement is not None and _binds_a_clock_call(statement, name):
        return True
    _, low, high = number
    epoch = isinstance(low, float) and _EPOCH_SECONDS[0] <= low <= high <= _EPOCH_SECONDS[1]
    growing = len(history) > 1 and all(a <= b for a, b in pairwise(history))
    return epoch and growing


def _binds_a_clock_call(statement: str, name: str) -> bool:
    try:
        tree = ast.parse(statement.strip())
    except SyntaxError:
        return False
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        if any(ast.unparse(t) == name for t in targets) and _is_clock_call(value):
            return True
    return False


def _is_clock_call(node: ast.expr) -> bool:
    """``time.time()``, ``perf_counter()``, ``timeit.default_timer()``."""
    if not isinstance(node, ast.Call) or node.args or node.keywords:
        return False
    func = node.func
    if isinstance(func, ast.Name):
        return func.id in _CLOCKS
    return (
        isinstance(func, ast.Attribute)
        and func.attr in _CLOCKS
        and isinstance(func.value, ast.Name)
        and func.value.id in _CLOCK_MODULES
    )
