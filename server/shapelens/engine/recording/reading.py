"""Reading values into records: the names a statement stored, read from its frame, each
value's metadata recorded into its :class:`~shapelens.engine.recording.run_records.VarStats`.

Only metadata is read (type, shape, dtype, device, ``requires_grad``, ``grad_fn``), plus
the value of a scalar (a loss) for its history; no user code runs (attributes through
``values.safe_attribute``). The
:class:`~shapelens.engine.recording.statement_recorder.StatementRecorder` decides when a
statement is read (sampling); this module only reads.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable
from types import FrameType
from typing import Any

from shapelens.engine.recording import values
from shapelens.engine.recording.code_info import CodeInfo
from shapelens.engine.recording.run_records import MAX_SHAPES, RunRecords, VarStats
from shapelens.engine.torch_support import torch_compat
from shapelens.engine.torch_support.simulated_values import bounded, bounded_dims

_MISSING = object()

CheckValue = Callable[[VarStats, Any, int, "FrameType | None", "CodeInfo | None"], bool]
"""``check(stats, value, kind, frame, info)``: scan a value just read for NaN/Inf (with the
frame and code whose statement stored it, None for a returned value); whether it held one."""


class Reader:
    """Reads values into the records of one :class:`RunRecords`."""

    def __init__(self, records: RunRecords) -> None:
        self.records = records
        self.scalars_on_gpu = False
        """Read 0-dim GPU tensors for their course (each read synchronises the device)."""
        self.check_value: CheckValue | None = None
        """Called on a value's hits 1, 2, 4, 8, ... (None: values are not scanned)."""
        self.varied = False
        """Set when a read saw a value it had read before in a new shape, dtype or device
        (the first read of a name is news, not a variation); whoever acts on it clears it."""
        self._unweakrefable: set[type] = set()
        self._frame: FrameType | None = None
        self._info: CodeInfo | None = None
        """The frame (and code) whose finished statement is being read, for ``check_value``."""

    def take_varied(self) -> bool:
        """Whether a read saw a variation since the last call (cleared)."""
        varied, self.varied = self.varied, False
        return varied

    def read_names(
        self,
        frame: FrameType,
        info: CodeInfo,
        line: int,
        names: tuple[str, ...],
        arguments: bool,
        *,
        counted: bool = False,
    ) -> bool:
        """Read the values of ``names`` on ``line``; whether any was new (shape, dtype,
        device, type). ``counted``: this hit was counted already."""
        try:
            scope = frame.f_locals
        except Exception:
            return False
        table = info.stats.get(line)
        if table is None:
            table = info.stats[line] = {}
        self._frame = frame
        self._info = info
        kinds = values.kind_of_type
        changed = False
        targets = info.target_stores.get(line, ())
        for name in names:
            if "." in name:
                value = _attribute_path(scope, frame, name)
            else:
                value = scope.get(name, _MISSING)
                if value is _MISSING and name in info.global_names:
                    value = frame.f_globals.get(name, _MISSING)
            if value is _MISSING:
                continue
            kind = kinds.get(type(value))
            if kind is None:
                kind = values.classify(value)
            # What a store into an attribute or an item holds was made elsewhere (and checked
            # there); `logits[logits < v] = -inf` is top-k sampling, not a NaN/Inf bug.
            checked = name not in targets
            if kind and self.read_value(
                info, table, line, name, value, kind, arguments, 0, counted, checked
            ):
                changed = True
        return changed

    def read_returned(
        self, info: CodeInfo, line: int, name: str, value: Any, frame: FrameType | None = None
    ) -> bool:
        """Read a value ``frame`` returned or yielded (``<return>``/``<yield>``) on ``line``
        (the frame is still there: its statement's inputs go with a non-finite value);
        whether it was new."""
        self._frame, self._info = frame, info
        kind = values.kind_of(value)
        if not kind:
            return False
        table = info.stats.get(line)
        if table is None:
            table = info.stats[line] = {}
        return self.read_value(info, table, line, name, value, kind, False, 0)

    def read_value(
        self,
        info: CodeInfo,
        table: dict[str, VarStats],
        line: int,
        name: str,
        value: Any,
        kind: int,
        argument: bool,
        depth: int,
        counted: bool = False,
        checked: bool = True,
    ) -> bool:
        """Read one value into ``table[name]``; whether it was new (shape, dtype, device or
        type). ``checked``: scan it for NaN/Inf."""
        if kind in values.CONTAINER_KINDS:
            return self._read_container(
                info, table, line, name, value, kind, argument, depth, counted, checked
            )
        tp = type(value)
        if kind == values.NUMBER and name == "_":
            return False  # the throwaway name (`for _ in range(n)`) says nothing
        # Read first, record after: reading may run Python code (a fake tensor's shape), which
        # must never run under the run records' lock; recording runs none, and holds the lock
        # the flusher thread drains under, so a record is never sent half-updated.
        seen = None if kind == values.NUMBER else _metadata(value, kind, self.scalars_on_gpu)
        with self.records.lock:
            stats = table.get(name)
            changed = stats is None or stats.type is not tp
            if stats is None:
                stats = table[name] = self.records.new_stats(info.file, line, name, tp)
                stats.is_argument = argument
            stats.type = tp
            hit = stats.hits + 1 if not counted or stats.hits == 0 else stats.hits
            if seen is None:
                # Only a new type counts as a change: a counter's every value would keep the
                # line read densely. Never checked for NaN/Inf (`best = float("inf")`).
                stats.note_number(value)
                stats.remember(value, hit)
                stats.hits = hit
                return changed
            if _record_metadata(stats, seen, hit):
                changed = True
                if hit > 1:
                    self.varied = True
            if tp not in self._unweakrefable:
                try:
                    stats.ref = weakref.ref(value)
                except TypeError:
                    self._unweakrefable.add(tp)
            stats.hits = hit
        scalar = seen.scalar
        if scalar is not None and seen.requires_grad:
            info.loss_lines[line] = name  # probed on every hit: see loss_turned
        check = self.check_value
        if not checked or check is None:
            return changed
        if scalar is not None:
            due = not math.isfinite(scalar)  # read already: checked on every read, free
        else:
            due = hit >= stats.next_nonfinite_check
            if due:
                stats.next_nonfinite_check = hit * 2
        # The statement's inputs go with its first non-finite value only.
        if due and check(stats, value, kind, self._frame, self._info):
            self._frame = None
        return changed

    def loss_turned(self, frame: FrameType, info: CodeInfo, line: int) -> bool:
        """Whether the loss that ``line`` stores holds NaN or Inf on this hit, which is not a
        sampled read: a few microseconds (its one value, as its history reads it: on the
        CPU, or on a GPU when asked), so the hit it turns on is read in full."""
        if self.check_value is None:
            return False  # the rules that look for non-finite values are done
        try:
            value = frame.f_locals.get(info.loss_lines[line], _MISSING)
        except Exception:
            return False
        if values.kind_of_type.get(type(value)) != values.TORCH:
            return False
        if type(value) in values.SHARDED_TYPES:  # its value is the ranks' together
            return False
        try:  # as _scalar reads it, with fewer attribute reads (this runs on every hit)
            if value.ndim or not (value.is_cpu or (self.scalars_on_gpu and not value.is_meta)):
                return False
            return not math.isfinite(value.item())
        except Exception:  # complex (no order), or no value to read (a fake tensor)
            return False

    def probe_loss(self, frame: FrameType, info: CodeInfo, line: int) -> None:
        """Read the loss of ``line`` in full if it turned non-finite since its last read (its
        hit is counted, or estimated, already): the statement after it runs."""
        if self.loss_turned(frame, info, line):
            self.read_names(frame, info, line, info.stores[line], False, counted=True)

    def _read_container(
        self,
        info: CodeInfo,
        table: dict[str, VarStats],
        line: int,
        name: str,
        value: Any,
        kind: int,
        argument: bool,
        depth: int,
        counted: bool,
        checked: bool,
    ) -> bool:
        """A list, tuple or dict: its entries (``batch["x"]``, ``out[0]``), a few levels deep."""
        changed = False
        if depth < values.MAX_CONTAINER_DEPTH:
            for entry, item in values.container_entries(name, value, kind):
                item_kind = values.kind_of(item)
                if item_kind == values.NUMBER:
                    continue  # a number inside a container: not a name the user bound
                if item_kind and self.read_value(
                    info, table, line, entry, item, item_kind, argument, depth + 1, counted,
                    checked,
                ):  # fmt: skip
                    changed = True
        return changed


class _Metadata:
    """What one read of a tensor or array saw, before it is recorded."""

    __slots__ = (
        "bounded", "device", "dtype", "grad_fn", "requires_grad", "scalar", "shape", "sharding",
    )  # fmt: skip

    def __init__(self) -> None:
        self.dtype: Any = None
        self.device: Any = None
        self.requires_grad: bool | None = None
        self.grad_fn: str | None = None
        self.shape: Any = None
        self.scalar: float | None = None
        self.bounded: tuple[int, ...] = ()
        self.sharding: tuple[str, tuple[int, ...]] | None = None


def _metadata(value: Any, kind: int, on_gpu: bool) -> _Metadata:
    """A tensor's or an array's metadata, as far as it can be read."""
    seen = _Metadata()
    try:
        if kind == values.TORCH:
            seen.dtype = value.dtype
            seen.device = value.device
            seen.requires_grad = requires_grad = value.requires_grad
            if requires_grad:
                grad_fn = value.grad_fn
                seen.grad_fn = None if grad_fn is None else type(grad_fn).__name__
            seen.shape = value.shape
            if bounded:  # a shape-only run's sizes that depend on the data
                seen.bounded = bounded_dims(value)
            if type(value) in values.SHARDED_TYPES:  # global shape; this rank's shard
                seen.sharding = torch_compat.sharding(value)
        else:
            seen.dtype = value.dtype
            seen.device = getattr(value, "device", None)
            seen.shape = tuple(value.shape)
    except Exception:
        seen.shape = None  # nested tensors and odd objects: keep what could be read
    if seen.shape is not None and not seen.shape and seen.sharding is None:
        # (a sharded tensor's value is the ranks' together: reading it is a collective)
        seen.scalar = _scalar(value, kind, on_gpu)
    return seen


def holds_tensors(table: dict[str, VarStats] | None) -> bool:
    """Whether a line's values read so far include a tensor (or an array: anything with a
    shape)."""
    return table is not None and any(stats.shape is not None for stats in table.values())


def _record_metadata(stats: VarStats, seen: _Metadata, hit: int) -> bool:
    """``seen`` recorded into ``stats`` as read on ``hit``; whether it was new (shape, dtype,
    device)."""
    changed = bool(seen.dtype != stats.dtype or seen.device != stats.device)
    stats.dtype = seen.dtype
    stats.device = seen.device
    if seen.requires_grad is not None:
        if seen.requires_grad is not stats.requires_grad and stats.requires_grad is not None:
            stats.grad_varied = True  # trained and evaluated: neither is the story
        stats.requires_grad = seen.requires_grad
        stats.grad_fn = seen.grad_fn
    if seen.scalar is not None:
        stats.remember(seen.scalar, hit)
    if seen.bounded != stats.bounded:
        stats.bounded = seen.bounded
        changed = True
    if seen.sharding != stats.sharding:
        stats.sharding = seen.sharding
        changed = True
    shape = seen.shape
    if shape != stats.shape:
        stats.shape = shape
        shapes = stats.shapes
        if shape is not None:
            stats.widen(shape)
            if shape not in shapes:
                changed = True
                if len(shapes) < MAX_SHAPES:
                    shapes.append(shape)
        stats.count_shape(shapes.index(shape) if shape in shapes else -1, hit)
    return changed


def _attribute_path(scope: dict[str, Any], frame: FrameType, path: str) -> Any:
    """``self.fc.weight`` read from the frame without running user code (no properties, no
    ``__getattr__``: ``values.safe_attribute``); ``_MISSING`` when any step is not found."""
    first, *rest = path.split(".")
    value = scope.get(first, _MISSING)
    if value is _MISSING:
        value = frame.f_globals.get(first, _MISSING)
    for attr in rest:
        if value is _MISSING:
            return _MISSING
        value = values.safe_attribute(value, attr)
        if value is None:
            return _MISSING
    return value


def _scalar(value: Any, kind: int, on_gpu: bool) -> float | None:
    """A 0-dim tensor's or array's value (a loss), for its history: on the CPU only, or on
    another device when ``on_gpu`` (reading it synchronises the device; a meta or fake tensor
    has no value); None for complex values, which have no order, and what cannot be read."""
    try:
        if kind == values.TORCH:
            device = value.device.type
            if device != "cpu" and not (on_gpu and device != "meta"):
                return None
            if value.dtype.is_complex:
                return None
            return float(value.item())
        if getattr(value.dtype, "kind", "") in ("b", "i", "u", "f"):
            return float(value)
    except Exception:
        pass
    return None
