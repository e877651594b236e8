"""Mechanisms a measurement switches off, to see what each costs in a whole-process run
(``bench/real_programs.py --breakdown``): ``SHAPELENS_OFF=reads,op_watch`` in the child's
environment. For measuring only: a run with one off records less than it should.

- ``tracing``: no tracing backend at all (nor the module tree): what is left is start-up,
  the runner and its channel;
- ``reads``: statements' values are never read (their hits are still counted);
- ``op_watch``: the torch function mode that follows checked statements' calls;
- ``modules``: the module tree;
- ``flusher``: the background flushes (the trace is written once, at the end).

``SHAPELENS_UNTUNED=1`` switches the other way: every schedule that saves time is off (every
hit of every statement read and checked, no line switched off, the op watch and the module
tree never quiet), so a test can check that tuning changes nothing the user is told
(``tests/test_real_programs.py``).
"""

from __future__ import annotations

import os
import sys

OFF_VARIABLE = "SHAPELENS_OFF"
UNTUNED_VARIABLE = "SHAPELENS_UNTUNED"
MECHANISMS = ("tracing", "reads", "op_watch", "modules", "flusher")


def switched_off() -> frozenset[str]:
    """The mechanisms the environment switches off (the bench checks the names it sets)."""
    return frozenset(os.environ.get(OFF_VARIABLE, "").split(",")).intersection(MECHANISMS)


def untuned() -> bool:
    """Whether every schedule that saves time is off (read when the engine is imported)."""
    return os.environ.get(UNTUNED_VARIABLE) == "1"


def tuned(value: int) -> int:
    """``value``, a schedule's threshold; never reached in an untuned run."""
    return sys.maxsize if untuned() else value
