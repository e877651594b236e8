"""How each rank of a distributed run ended, and where: what the merged trace's ``ranks``
says, and what the collective findings name for a rank in no collective."""

from __future__ import annotations

import re

from shapelens.trace.finding import RankCall
from shapelens.trace.model import RankEnd, Trace
from shapelens.trace.rank_facts import RankFacts

STOPPED_BY_LAUNCHER = ("SIGTERM", "SIGINT", "SIGHUP")
"""Signals torchrun sends a rank when another failed (or the run is stopped)."""


def rank_end(rank: int, trace: Trace, facts: RankFacts) -> RankEnd:
    """How and where one rank ended."""
    file, line = None, None
    if trace.exception is not None:
        file, line = trace.exception.file, trace.exception.line
    waiting = facts.calls[-1] if facts.calls and facts.calls[-1].state == "waiting" else None
    if file is None and waiting is not None:
        file, line = waiting.file, waiting.line
    if file is None and facts.position and trace.status not in ("ok", "exit"):
        # (a rank that ended on its own was last seen wherever its last flush found it)
        file, line = facts.position[0].file, facts.position[0].line
    signal = facts.signal
    if facts.stopped:
        how = f"stopped while waiting in {waiting.op}" if waiting else "stopped while running"
    elif trace.status == "exception" and trace.exception is not None:
        how = f"raised {trace.exception.type}"
        if signal in STOPPED_BY_LAUNCHER:
            how += f", then stopped by torchrun ({signal})"
    elif signal is not None:
        how = f"killed by {signal}"
        if waiting is not None:
            how += f" in {waiting.op}"
    elif trace.status == "ok":
        how = "ran to its end"
    elif trace.status == "exit":
        how = f"exited {trace.exit_code}"
    else:
        how = trace.detail or trace.status
    return RankEnd(
        rank=rank,
        status=trace.status,
        exit_code=trace.exit_code,
        signal=signal,
        how=how,
        file=file,
        line=line,
        collective=waiting.op if waiting is not None else None,
    )


def where_it_ended(
    rank: int, trace: Trace, facts: RankFacts, *, state: str | None = None
) -> RankCall:
    """A rank in no collective: the line it was running, or ended at, and how."""
    end = rank_end(rank, trace, facts)
    note = end.how
    if state is None:
        state = "running" if facts.stopped else "ended"
        if facts.stopped and facts.inside is not None:
            state, note = "blocked", inside_text(facts.inside)
        if facts.signal is not None and facts.signal not in STOPPED_BY_LAUNCHER:
            state = "died"
    return RankCall(
        rank=rank, op=None, file=end.file, line=end.line, state=state, note=note,
        stack=facts.position,
    )  # fmt: skip


def inside_text(inside: str) -> str:
    """``backward (DDP all-reduces gradients there)``."""
    if inside == "backward":
        return "backward (DDP all-reduces gradients there)"
    return f"torch.distributed's {inside}"


def short_error(error: str) -> str:
    """gloo's ``RuntimeError: [/…/pair.cc:537] Read error [127.0.0.1]:7074: Connection reset
    by peer. This is typically caused by…`` as ``RuntimeError: Read error …: Connection
    reset by peer``: its first sentence, without the C++ source location."""
    kind, colon, message = error.partition(": ")
    if not colon:
        kind, message = "", error
    message = re.sub(r"^\[[^\]]*\.(?:cc|cpp|h|hpp):\d+\]\s*", "", message.strip())
    first = re.split(r"\.\s+(?=[A-Z])", message, maxsplit=1)[0].rstrip(".")
    return f"{kind}: {first}" if kind else first
