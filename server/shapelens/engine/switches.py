"""Mechanisms a measurement switches off, to see what each costs in a whole-process run
(``bench/real_programs.py --breakdown``): ``SHAPELENS_OFF=reads,op_watch`` in the child's
environment. For measuring only: a run with one off records less than it should.

- ``tracing``: no tracing backend at all (nor the module tree): what is left is start-up,
  the runner and its channel;
- ``reads``: statements' values are never read (their hits are still counted);
- ``op_watch``: the torch function mode that follows checked statements' calls;
- ``modules``: the module tree;
- ``flusher``: the background flushes (the trace is written once, at the end).
"""

from __future__ import annotations

import os

OFF_VARIABLE = "SHAPELENS_OFF"
MECHANISMS = ("tracing", "reads", "op_watch", "modules", "flusher")


def switched_off() -> frozenset[str]:
    """The mechanisms the environment switches off (the bench checks the names it sets)."""
    return frozenset(os.environ.get(OFF_VARIABLE, "").split(",")).intersection(MECHANISMS)
