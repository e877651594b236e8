"""What the engine hands its rules: one small record per kind of event of the running
program. The recorder (and the session, for memory) makes them only when some rule has
subscribed to their kind (:class:`~shapelens.engine.findings.dispatch.Dispatcher`); a rule
reads them and answers with findings.

Each class says, in :attr:`Event.watches`, what the engine must watch for the event to
exist at all: the torch calls of checked statements (the op watch, ``"calls"``), or their
elementwise operators only (``"operators"``).
"""

from __future__ import annotations

from types import FrameType, TracebackType
from typing import Any, ClassVar, Literal

from shapelens.engine.findings.collate import Collated
from shapelens.engine.findings.context import OriginOf
from shapelens.engine.findings.op_watch import Called, FailedCall
from shapelens.engine.findings.provenance import Provenance
from shapelens.engine.memory.ledger import OutOfMemory
from shapelens.engine.recording.code_info import CodeInfo
from shapelens.engine.recording.run_records import VarStats
from shapelens.engine.source.shape_comments import ShapeComment
from shapelens.engine.source.source_map import OpSite

Watch = Literal["calls", "operators"]


class Event:
    """Base of the events; ``watches``: what must be watched for it to be seen."""

    __slots__ = ()
    watches: ClassVar[Watch | None] = None


class StatementChecked(Event):
    """A checked hit of statement ``line`` (hits 1 to 4, 8, 16, … and after news) is about
    to run in ``frame``: the values its expressions name can be read from the frame."""

    __slots__ = ("frame", "info", "line")

    def __init__(self, *, frame: FrameType, info: CodeInfo, line: int) -> None:
        self.frame = frame
        self.info = info
        self.line = line


class OperatorRan(Event):
    """An elementwise torch op that a watched statement ran (its ``site``), with its real
    operands and result."""

    __slots__ = ("info", "left", "line", "result", "right", "site")
    watches = "operators"

    def __init__(
        self, *, info: CodeInfo, line: int, site: OpSite, left: Any, right: Any, result: Any
    ) -> None:
        self.info = info
        self.line = line
        self.site = site
        self.left = left
        self.right = right
        self.result = result


class CallRan(Event):
    """A torch call a watched statement (``line``) made itself; ``counts``: the calls of
    each op the statement made so far on this hit (the same dict for the whole hit)."""

    __slots__ = ("called", "counts", "info", "line")
    watches = "calls"

    def __init__(
        self, *, called: Called, info: CodeInfo, line: int, counts: dict[str, int]
    ) -> None:
        self.called = called
        self.info = info
        self.line = line
        self.counts = counts


class ValuesChanged(Event):
    """A read of statement ``line`` saw a value of a new shape, dtype, device or type."""

    __slots__ = ("info", "line")

    def __init__(self, *, info: CodeInfo, line: int) -> None:
        self.info = info
        self.line = line


class CommentedStatementEnded(Event):
    """A read hit of a statement with a shape comment just completed (or its frame returned
    ``returned``, for ``return x  # (B, T, C)``)."""

    __slots__ = ("arguments", "comment", "frame", "info", "line", "returned", "stored")

    def __init__(
        self,
        *,
        frame: FrameType,
        info: CodeInfo,
        line: int,
        comment: ShapeComment,
        stored: tuple[str, ...],
        returned: Any = None,
        arguments: bool = False,
    ) -> None:
        self.frame = frame
        self.info = info
        self.line = line
        self.comment = comment
        self.stored = stored
        self.returned = returned
        self.arguments = arguments


class NonfiniteRead(Event):
    """A value just read holds NaN or Inf (``state``), with the record it was read into,
    and the frame whose statement stored it and that code's info (None: a returned value,
    or not the statement's first non-finite value: its inputs are not read again)."""

    __slots__ = ("frame", "info", "state", "stats", "value")

    def __init__(
        self,
        *,
        stats: VarStats,
        value: Any,
        state: str,
        frame: FrameType | None = None,
        info: CodeInfo | None = None,
    ) -> None:
        self.stats = stats
        self.value = value
        self.state = state
        self.frame = frame
        self.info = info


class CallFailed(Event):
    """The torch call that raised ``exc`` was seen (``failed``: the call, its operands as
    passed, the module calls it was made in) while statement ``line`` of user code ran: by
    the op watch, or by a replay of the failing statement on fake copies (``provenance``:
    where the replay's values came from; ``origin_of``: where its copies' originals were
    born). ``collated``: the call was made by a DataLoader's collate function, on these
    samples, for the user's loop (:mod:`.collate`). The engine reports the findings if the
    run ends with this exception."""

    __slots__ = ("collated", "exc", "failed", "info", "line", "origin_of", "provenance")
    watches = "calls"

    def __init__(
        self,
        *,
        exc: BaseException,
        failed: FailedCall,
        info: CodeInfo,
        line: int,
        provenance: Provenance | None = None,
        origin_of: OriginOf | None = None,
        collated: Collated | None = None,
    ) -> None:
        self.exc = exc
        self.failed = failed
        self.collated = collated
        self.info = info
        self.line = line
        self.provenance = provenance
        self.origin_of = origin_of


class Raised(Event):
    """An exception was raised in ``frame`` (user code) while its statement ``line`` ran,
    and no rule explained it from the failing call (:class:`CallFailed`); ``tb``: its
    traceback from ``frame`` inwards (on 3.11 the exception's own is set only later). The
    engine reports the findings if the run ends with this exception."""

    __slots__ = ("exc", "frame", "info", "line", "tb")

    def __init__(
        self,
        *,
        exc: BaseException,
        frame: FrameType,
        info: CodeInfo,
        line: int,
        tb: TracebackType | None = None,
    ) -> None:
        self.exc = exc
        self.frame = frame
        self.info = info
        self.line = line
        self.tb = tb if tb is not None else exc.__traceback__


class Warned(Event):
    """A warning is being shown while ``frame``, the innermost frame of user code, runs;
    ``filename``: where the warning says it comes from."""

    __slots__ = ("category", "filename", "frame", "info", "issued_here", "message")

    def __init__(
        self,
        *,
        message: str,
        category: type,
        frame: FrameType,
        info: CodeInfo,
        issued_here: bool,
        filename: str = "",
    ) -> None:
        self.message = message
        self.category = category
        self.frame = frame
        self.info = info
        self.issued_here = issued_here
        self.filename = filename


class RanOutOfMemory(Event):
    """A shape-only run's simulated GPU ran out of memory at ``event.where`` (the run is
    over: its breakdown is settled); ``expression``: that line's text."""

    __slots__ = ("event", "expression")

    def __init__(self, *, event: OutOfMemory, expression: str | None) -> None:
        self.event = event
        self.expression = expression
