"""What the statement recorder and both tracing backends know about one code object of user code,
computed once: its statements, the names each statement stores, its def line, its yields,
and the tables its lines record into."""

from __future__ import annotations

import dis
from types import CodeType, FrameType

from shapelens.engine.recording.run_records import RunRecords
from shapelens.engine.source.source_map import Candidate, OpSite, SourceMap

NO_STATEMENT = -1
"""The statement a frame runs before its first line event, and after a raise or a return."""

_STORE_OPS = frozenset(
    {
        "STORE_FAST",
        "STORE_NAME",
        "STORE_GLOBAL",
        "STORE_DEREF",
        "STORE_FAST_STORE_FAST",
        "STORE_FAST_LOAD_FAST",
    }
)
_GENERATOR_FLAGS = 0x20 | 0x80 | 0x200  # CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR
_VARARGS, _VARKEYWORDS = 0x04, 0x08


class CodeInfo:
    """What the tracer needs about one code object of user code, computed once."""

    __slots__ = (
        "arg_names",
        "broadcast_lines",
        "checked_lines",
        "counter_of",
        "def_line",
        "definitions",
        "dense_until",
        "elementwise",
        "file",
        "global_names",
        "hits",
        "is_generator",
        "is_module",
        "loop_exits",
        "loop_headers",
        "loss_lines",
        "op_sites",
        "probe_at",
        "read_at",
        "shape_comments",
        "source",
        "stale",
        "statement_of",
        "stats",
        "stays_on",
        "stores",
        "switched_off",
        "target_stores",
        "thread",
        "unique_stores",
        "yield_offsets",
    )

    def __init__(self, code: CodeType, file: str, source: SourceMap, records: RunRecords) -> None:
        self.file = file
        self.source = source
        self.statement_of = source.statement_of
        # def/class lines count calls (below), not the execution of the def statement.
        self.definitions = frozenset(source.def_line_of.values())
        self.is_module = code.co_name == "<module>"
        self.def_line = source.def_line_of.get(code.co_firstlineno, code.co_firstlineno)
        count = code.co_argcount + code.co_kwonlyargcount
        count += bool(code.co_flags & _VARARGS) + bool(code.co_flags & _VARKEYWORDS)
        self.arg_names = code.co_varnames[:count]
        self.is_generator = bool(code.co_flags & _GENERATOR_FLAGS)
        self.hits = records.hits_table(file)
        self.stats = records.stats_table(file)
        stores, global_names, yield_offsets, lines = _scan(code, self.statement_of)
        # Attribute and subscript stores of this code's statements (`self.w = …`, `pe[i] = …`).
        self.target_stores: dict[int, frozenset[str]] = {}
        for statement, targets in source.target_stores.items():
            if statement in lines and statement not in source.def_line_of.values():
                stored = stores.setdefault(statement, [])
                stored.extend(t for t in targets if t not in stored)
                self.target_stores[statement] = frozenset(targets)
        self.stores = {line: tuple(names) for line, names in stores.items()}
        # Statements whose names no other statement stores: a value read when the frame
        # ends is the last one that statement made (the final, often smaller, batch).
        owners: dict[str, int] = {}
        for stored in stores.values():
            for name in stored:
                owners[name] = owners.get(name, 0) + 1
        self.unique_stores = frozenset(
            line for line, stored in stores.items() if all(owners[n] == 1 for n in stored)
        )
        # Metadata sampling (see StatementRecorder): the hit at which each statement is read next,
        # and until which hit it is read on every hit.
        self.read_at: dict[int, int] = {}
        self.dense_until: dict[int, int] = {}
        self.stale: set[int] = set()  # statements skipped since they were last read
        self.global_names = frozenset(global_names)
        self.yield_offsets = frozenset(yield_offsets)
        statements = {self.statement_of.get(line, line) for line in lines}
        self.elementwise: dict[int, tuple[Candidate, ...]] = {
            line: exprs for line, exprs in source.elementwise.items() if line in statements
        }
        # Elementwise operators, watched as they run when torch is loaded (their operands
        # may be calls or subscripts, or attributes of objects we cannot read safely).
        self.op_sites: dict[int, tuple[OpSite, ...]] = {
            line: sites for line, sites in source.op_sites.items() if line in statements
        }
        self.broadcast_lines = set(self.elementwise) | set(self.op_sites)
        # Checked on hits 1 to 4, 8, 16, ...: broadcasts, and the op watch (every torch call's
        # operands, a failing one's explained).
        self.checked_lines = self.broadcast_lines | (source.call_lines & statements)
        # What paces each statement (see SourceMap.counter_of), for estimating the hits of
        # statements whose line events were switched off (sys.monitoring backend).
        self.counter_of = {
            line: counter for line, counter in source.counter_of.items() if line in statements
        }
        self.loop_headers = source.loop_headers & statements
        # Statements that stored a 0-dim tensor with a gradient (a loss) → its name: probed on
        # every hit, so the hit where it first turns non-finite is seen, before a step
        # spreads it (read in full on that hit; sampled as any line otherwise).
        self.loss_lines: dict[int, str] = {}
        # A switched-off statement that follows a loss line → that line: its events stay on
        # (sys.monitoring) to probe the loss before the optimizer steps.
        self.probe_at: dict[int, int] = {}
        # The shape comments about its statements (and its def line: the arguments).
        self.shape_comments = {
            line: comment
            for line, comment in source.shape_comments().items()
            if line in statements or line == self.def_line
        }
        self.loop_exits = records.loop_exits_table(file)
        # Statements whose line events are off: statement → the backend's re-arm generation
        # then (an event of the same generation is another line of the same statement).
        self.switched_off: dict[int, int] = {}
        # The thread that started this code's frames, and whether its lines stay on (see
        # :meth:`started`).
        self.thread: int | None = None
        self.stays_on = False

    def ended_its_loop(self, exc: BaseException | None, statement: int) -> bool:
        """Whether ``exc`` is a ``for`` loop's iterator ending (a DataLoader's StopIteration,
        reported in the loop's frame): its header's hit completed, and was the loop's exit."""
        return isinstance(exc, StopIteration) and statement in self.loop_headers

    def started(self, frame: FrameType, thread: int) -> None:
        """A frame of this code starts in ``thread``. Its lines are never switched off from
        now on (they are counted, not estimated) where that would go wrong:

        - another thread runs it too: switching a line off and on is a check and a change of
          shared tables that another thread's line event can come between (a line left off
          with no estimate counted nothing more);
        - it calls itself (directly, or through up to two other frames): a recursion's lines
          after the recursive call run while no call is made, so their rate per call, which
          estimates them, is no rate at all (50,000 returns showed 65)."""
        if self.stays_on:
            return
        if self.thread != thread:
            if self.thread is None:
                self.thread = thread
            else:
                self.stays_on = True
        caller = frame.f_back
        code = frame.f_code
        for _ in range(3):
            if caller is None:
                return
            if caller.f_code is code:
                self.stays_on = True
                return
            caller = caller.f_back


def _scan(
    code: CodeType, statement_of: dict[int, int]
) -> tuple[dict[int, list[str]], set[str], set[int], set[int]]:
    """The bytecode read once: the names each statement stores, the globals stored, the
    offsets of yields, and the lines that have code."""
    stores: dict[int, list[str]] = {}
    global_names: set[str] = set()
    yield_offsets: set[int] = set()
    lines: set[int] = set()
    line: int | None = None
    for instruction in dis.get_instructions(code):
        line = _line_of(instruction, line)
        if line is None:
            continue
        lines.add(line)
        if instruction.opname == "YIELD_VALUE":
            # 3.11/3.12 report the YIELD_VALUE itself as f_lasti, 3.13 the unit after it.
            yield_offsets.update((instruction.offset, instruction.offset + 2))
        if instruction.opname not in _STORE_OPS:
            continue
        statement = statement_of.get(line, line)
        names = (
            instruction.argval if isinstance(instruction.argval, tuple) else (instruction.argval,)
        )
        for name in names:
            if isinstance(name, str) and name not in stores.setdefault(statement, []):
                stores[statement].append(name)
        if instruction.opname == "STORE_GLOBAL":
            global_names.add(str(instruction.argval))
    return stores, global_names, yield_offsets, lines


def _line_of(instruction: dis.Instruction, previous: int | None) -> int | None:
    """The line of an instruction: its position (3.11+), else on 3.10 the line its run of
    instructions started (``starts_line`` is set on the first of a line only)."""
    if hasattr(instruction, "positions"):
        return instruction.positions.lineno if instruction.positions else None
    return instruction.starts_line or previous
