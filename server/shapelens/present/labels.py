"""Hint labels, in two forms.

Full (``hintFormat: full``): everything per value: ``pred (4,1) f32 cpu grad ×10``.

Compact (the default) says what the line is read for and leaves the rest to hover:

- the shape always (varying dims as ranges: ``x (2,1‥5,6)``);
- the dtype and the device only where they are not the run's usual ones (lovely-tensors
  leaves out float32 and the CPU; we leave out whatever most of this run's tensors are);
- ``grad`` only where requires_grad differs from the tensors the line read (``pred =
  model(x)`` gains it from the weights; ``x.detach()`` says ``no grad``);
- hit counts only where they differ from the enclosing block's: the ``def`` line or the
  loop header says ``×22`` once;
- equal descriptions of one line merge: ``q k v (4,64,64)``;
- a clock's readings (``t0 = time.time()``) show nothing (``present.clocks``);
- lines that hold no tensor or number show nothing, unless coverage is asked for.

Either form names a shape's dims on request (``dimNames``): ``k (B,n_head,T,16)``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from shapelens.present.clocks import is_clock_reading
from shapelens.present.dim_names import DimNames, dim_names
from shapelens.present.markdown import hits_text
from shapelens.present.shapes import (
    alternatives_text,
    dtype_text,
    number_range_text,
    number_text,
    ranged_shape_text,
    scalar_text,
    shape_text,
    sharded_text,
    sparkline,
)
from shapelens.present.source_blocks import Block, SourceBlocks, source_blocks
from shapelens.trace import TracedLine, TracedVar
from shapelens.trace.model import SimulatedLine


@dataclass(frozen=True, kw_only=True)
class HintStyle:
    format: str = "compact"
    """``compact`` or ``full``."""
    coverage: bool = False
    """Lines that bound no value show how often they ran."""
    dim_names: str = "off"
    """``off``, ``names`` (``k (B,n_head,T,16)``) or ``both`` (``k (B=2,n_head=4,T=8,16)``)."""


DEFAULT_STYLE = HintStyle()


@dataclass(frozen=True, kw_only=True)
class RunUsual:
    """The dtype and device most of a run's tensors had: a hint leaves them out. A
    shape-only run's hints each say so."""

    dtype: str | None = None
    device: str | None = None
    shape_only: bool = False


SHAPE_ONLY_MARK = "[fake]"
"""Ends every hint of a shape-only run (``--fake``): its values were never real."""
SIMULATED_VALUE = "simulated"
"""A shape-only run's stand-in for a value the program read (``loss.item()``): never its
number, which was never real."""


def simulated_mark(simulated: SimulatedLine) -> str:
    """A line where a shape-only run stood in for values: ``simulated read``, or ``branch on
    simulated value`` where the program decided on one (``if``, ``while``); hover counts them."""
    return "branch on simulated value" if simulated.decisions else "simulated read"


def run_usual(lines: Iterable[TracedLine], *, shape_only: bool = False) -> RunUsual:
    """The most common dtype and device among the run's tensors (each variable once)."""
    dtypes: Counter[str] = Counter()
    devices: Counter[str] = Counter()
    for line in lines:
        for var in line.vars:
            if var.number is not None or var.shape is None:
                continue
            if var.dtype is not None:
                dtypes[var.dtype] += 1
            if var.device is not None:
                devices[var.device] += 1
    return RunUsual(
        dtype=dtypes.most_common(1)[0][0] if dtypes else None,
        device=devices.most_common(1)[0][0] if devices else None,
        shape_only=shape_only,
    )


class FileHints:
    """The labels of one file's lines in one run; ``lines`` are keyed by the line that ran."""

    def __init__(
        self,
        lines: Mapping[int, TracedLine],
        source: str | Sequence[str],
        usual: RunUsual,
        simulated: Mapping[int, SimulatedLine] | None = None,
    ) -> None:
        self._lines = lines
        self._simulated = simulated or {}
        self._source = source.splitlines(keepends=True) if isinstance(source, str) else source
        self._blocks: SourceBlocks = source_blocks(source)
        self._usual = usual
        self._scope_grads: dict[tuple[int, str], bool | None] | None = None

    def label(self, line: TracedLine, style: HintStyle = DEFAULT_STYLE) -> str:
        if style.format == "full":  # everything, the counts of lines without values too
            text = "  ".join(
                var_label(
                    v,
                    line.sampled,
                    clock=self._is_clock(line.line, v),
                    names=self._dim_names(line.line, v, style),
                    sizes=style.dim_names != "names",
                )
                for v in line.vars
            )
            if not text and (line.hits > 1 or (style.coverage and line.hits)):
                text = hits_text(line.hits, line.sampled)
        else:
            text = self._compact(line, style)
        simulated = self._simulated.get(line.line)
        if simulated is not None and not any(v.simulated for v in line.vars):
            text = "  ".join(part for part in (text, simulated_mark(simulated)) if part)
        return f"{text}  {SHAPE_ONLY_MARK}" if text and self._usual.shape_only else text

    # -- compact ------------------------------------------------------------------------
    def _compact(self, line: TracedLine, style: HintStyle) -> str:
        opened = self._blocks.opened.get(line.line)
        enclosing = self._block_count(self._blocks.block_of(line.line))
        count = self._block_count(opened) if opened is not None else None
        if count is not None:  # a def or loop header says how often its block ran
            shown_count, sampled = count
        else:
            shown_count, sampled = _line_count(line)
        # Counts that differ from the block's (unknown block: any count above one).
        show_count = shown_count > 1 if enclosing is None else shown_count != enclosing[0]
        consumed = self._consumed_grad(line.line)
        described: list[tuple[str, str]] = []
        for var in line.vars:
            if self._is_clock(line.line, var):
                continue
            # A header binds once per pass (its last event, a loop's exit, binds nothing).
            same = opened is not None or var.hits == shown_count
            own = None if same else hits_text(var.hits, line.sampled)
            names = self._dim_names(line.line, var, style)
            described.append(self._describe(var, consumed, own, names, style.dim_names != "names"))
        parts = _merge(described)
        if not parts and not (opened is not None or style.coverage):
            return ""  # nothing bound: the count alone is coverage, not asked for
        if show_count or (style.coverage and not parts):
            parts.append(hits_text(shown_count, sampled))
        return "  ".join(parts)

    def _describe(
        self,
        var: TracedVar,
        consumed: bool | None,
        own_count: str | None,
        names: DimNames | None,
        sizes: bool,
    ) -> tuple[str, str]:
        """(name, the rest) of one value's compact description."""
        if var.simulated:
            return var.name, SIMULATED_VALUE + (f" {own_count}" if own_count else "")
        if var.number is not None:
            text = _number_text(var, var.number)
            return var.name, text + (f" {own_count}" if own_count else "")
        per_rank = _rank_label(var)
        if per_rank is not None:
            return var.name, per_rank
        parts = [_shapes_text(var, names, sizes)]
        if var.history and (course := sparkline(var.history)):
            parts = [scalar_text(var.history[-1], var.dtype), course]
        usual = self._usual
        if var.dtype is not None and var.dtype != usual.dtype:
            parts.append(dtype_text(var.dtype))
        if var.device is not None and var.device != usual.device:
            parts.append(var.device)
        known = not var.grad_varied and var.requires_grad is not None
        if known and var.requires_grad != bool(consumed):
            parts.append("grad" if var.requires_grad else "no grad")
        if own_count:
            parts.append(own_count)
        return var.name, " ".join(parts)

    def _statement(self, line: int) -> str | None:
        """The source of the statement that starts on ``line``, all its lines."""
        end = self._blocks.last_line.get(line)
        return None if end is None else "".join(self._source[line - 1 : end])

    def _is_clock(self, line: int, var: TracedVar) -> bool:
        if var.number is None:
            return False
        return is_clock_reading(self._statement(line), var.name, var.number, var.history)

    def _dim_names(self, line: int, var: TracedVar, style: HintStyle) -> DimNames | None:
        """What to call each dim of ``var`` in a hint, when the style names dims."""
        if style.dim_names == "off" or var.shape is None:
            return None
        statement = self._statement(line)
        found = dim_names(statement, var.name, len(var.shape)) if statement else None
        return None if found is None else tuple(_hint_name(n) for n in found)

    def _block_count(self, block: Block) -> tuple[int, bool] | None:
        """How often ``block`` ran (and whether that is an estimate); the module runs once."""
        if block.header == 0:
            return 1, False
        # Not the loop header's own events: one per iteration plus one per exit, or not,
        # depending on the Python version and backend.
        counter = self._lines.get(block.counter) if block.counter is not None else None
        return None if counter is None else _line_count(counter)

    def _consumed_grad(self, line: int) -> bool | None:
        """Whether a tensor ``line`` reads requires grad (None: it reads none we traced, or
        only ones that required it on some hits and not on others)."""
        reads = self._blocks.reads.get(line)
        if not reads:
            return None
        grads = self._grads_by_scope()
        found: bool | None = None
        for name in reads:
            known = grads.get(self._scope_key(line, name))
            if known is not None:
                found = found or known
        return found

    def _scope_key(self, line: int, name: str) -> tuple[int, str]:
        """Where ``name`` lives: attribute paths (``self.weight``) with the class (any of its
        methods may set them), plain names with their function."""
        blocks = self._blocks
        if "." in name:
            return -blocks.owner.get(line, 0), name
        return blocks.scope.get(line, 0), name

    def _grads_by_scope(self) -> dict[tuple[int, str], bool | None]:
        """(scope, name) → whether a value bound to it in this run required grad; None when
        that varied (a forward run in training and under no_grad)."""
        if self._scope_grads is None:
            grads: dict[tuple[int, str], bool | None] = {}
            for number, traced in self._lines.items():
                for var in traced.vars:
                    if var.requires_grad is None:
                        continue
                    key = self._scope_key(number, _base_name(var.name))
                    seen = None if var.grad_varied else var.requires_grad
                    grads[key] = seen if key not in grads or grads[key] == seen else None
            self._scope_grads = grads
        return self._scope_grads


def _line_count(line: TracedLine) -> tuple[int, bool]:
    """How often a line ran, as a hint counts it: how often it bound its values when it
    binds some (a comprehension's line has an event per item; a run stopped mid-statement
    has one more event than reads), else its events."""
    if line.vars:
        return max(v.hits for v in line.vars), line.sampled
    return line.hits, line.sampled


def _base_name(name: str) -> str:
    """``splits['train']`` → ``splits``: an entry of a container is read through its name."""
    return name.split("[", 1)[0]


def _merge(described: Sequence[tuple[str, str]]) -> list[str]:
    """``q k v (4,64,64)``: values of one line with the same description share it."""
    order: list[str] = []
    names: dict[str, list[str]] = {}
    for name, rest in described:
        if rest.startswith("="):
            order.append(name + rest)  # ``B=4``: a value, not shared
            continue
        if rest not in names:
            names[rest] = []
            order.append(rest)
        names[rest].append(name)
    return [" ".join([*names[item], item]) if item in names else item for item in order]


def _number_text(var: TracedVar, number: tuple[float, float, float]) -> str:
    """``=4`` (joined to the name), or `` 0‥999``, with a float's course when it moved."""
    last, low, high = number
    if low == high or low != low or high != high:  # constant (or NaN: no order to show)
        return f"={number_text(last)}"
    text = number_range_text(low, high)
    if isinstance(last, float) and (course := sparkline(var.history)):
        text += f" {course}"  # a float's course (a loss); a counter's ramp says nothing
    return text


def _hint_name(name: str | None) -> str | None:
    """A dim's name as a hint writes it: a variable's (``B``) or an attribute's (``n_head``
    of ``config.n_head``). An expression (``C // n_head``) is written as its size: the hint
    ends the line that spells it out, so its value is the news, and a hint has room for a
    number, not a formula (hover names it: ``C // n_head=16``)."""
    if name is None or not all(part.isidentifier() for part in name.split(".")):
        return None
    return name.rpartition(".")[2]


def _shapes_text(var: TracedVar, names: DimNames | None = None, sizes: bool = True) -> str:
    """The shape, its dims named by ``names`` (with their ``sizes``, or instead of them)."""
    bounded = var.bounded_dims
    if var.shape_varies and var.dim_ranges is not None:  # every varying dim as its range
        return ranged_shape_text(var.dim_ranges, names=names, sizes=sizes, bounded=bounded)
    if var.shape_varies:  # the number of dims varied: the distinct shapes themselves
        return alternatives_text(var.shapes)
    text = shape_text(var.shape, names=names, sizes=sizes, bounded=bounded)
    if var.placements is not None:  # global shape, then each rank's shard
        shards: list[tuple[int | None, tuple[int, ...] | None]] = [
            (r.rank, r.local_shape) for r in var.ranks
        ] or [(None, var.local_shape)]
        text += " " + sharded_text(var.placements, shards)
    return text


def _rank_label(var: TracedVar) -> str | None:
    """``(8,3) r0 | (7,3) r1`` when ranks disagree; None when they agree."""
    distinct = {(r.shape, r.dtype, r.device) for r in var.ranks}
    if len(distinct) <= 1:
        return None
    return " | ".join(f"{shape_text(r.shape)} r{r.rank}" for r in var.ranks)


def var_label(
    var: TracedVar,
    sampled: bool = False,
    *,
    clock: bool = False,
    names: DimNames | None = None,
    sizes: bool = True,
) -> str:
    """The full description of one value: ``pred (4,1) f32 cpu grad ×10``, ``B=4``; a
    ``clock``'s readings: ``t0 clock ×10``; dims named by ``names`` as in a compact hint."""
    count = f" {hits_text(var.hits, sampled)}" if var.hits > 1 else ""
    if clock:
        return f"{var.name} clock{count}"
    if var.simulated:
        return f"{var.name} {var.type}{count}"
    if var.number is not None:
        text = _number_text(var, var.number)
        return var.name + (text if text.startswith("=") else f" {text}") + count
    per_rank = _rank_label(var)
    if per_rank is not None:
        return f"{var.name} {per_rank}"
    parts = [var.name, _shapes_text(var, names, sizes)]
    if var.history and (course := sparkline(var.history)):
        # A scalar (a loss): its course.
        parts[1:] = [scalar_text(var.history[-1], var.dtype), course]
    parts.append(dtype_text(var.dtype))
    if var.device is not None:
        parts.append(var.device)
    if var.requires_grad:
        parts.append("grad")
    return " ".join(p for p in parts if p) + count
