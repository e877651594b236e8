"""What one rank of a distributed run left besides its trace: the collectives it called,
where it was last, how it ended. The merge reads these to say where ranks stopped meeting."""

from __future__ import annotations

from dataclasses import dataclass, field

from shapelens.trace.finding import RankCall, StackFrame


@dataclass(frozen=True, kw_only=True)
class RankFacts:
    calls: tuple[RankCall, ...] = ()
    """Its latest collective calls, in the order it made them."""
    position: tuple[StackFrame, ...] = ()
    """Its stack through user code at its last flush, innermost first."""
    ending: str | None = None
    """How its process ended, as its warden saw it: ``signal SIGKILL``, ``exit 1``; None
    when unknown (still running when the run was stopped, or a rank file from elsewhere)."""
    first_bound: dict[tuple[str, int], int] = field(default_factory=dict)
    """The order in which its lines first bound a value (where a difference began)."""
    inside: str | None = None
    """torch code its main thread was in at its last flush that may wait on the other
    ranks (``backward``: DDP all-reduces gradients there), if any."""
    stopped: bool = False
    """The launcher stopped it (a time limit, a hang, a cancel): it answered with its last
    flush, then ended as told."""

    @property
    def signal(self) -> str | None:
        """The signal that ended it (``SIGKILL``), if one did and it was not our stop."""
        if self.stopped:
            return None
        if self.ending is not None and self.ending.startswith("signal "):
            return self.ending.removeprefix("signal ")
        return None

    @property
    def waiting(self) -> RankCall | None:
        """The collective it was in when its record ends (None: in none)."""
        last = self.calls[-1] if self.calls else None
        return last if last is not None and last.state == "waiting" else None
