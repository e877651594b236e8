"""One module's calls as the tree records them: the tensors that went in and came out (a
slot per position, its shape over every call), and the counts a quiet spell estimates from
the user statement that paces them (see :mod:`shapelens.engine.modules.tree`)."""

from __future__ import annotations

from typing import Any

from shapelens.engine.recording import values

MAX_SLOTS = 8
"""Tensors recorded per call, in and out (the first ones)."""

Pace = tuple[dict[int, int], dict[int, int], int]
"""The user statement that paces a module's calls: its file's hit table and loop-exit table
(which the line tracer counts exactly) and its line."""


class TensorSlot:
    """One argument or result position of a module: its shape over every call."""

    __slots__ = ("device", "dtype", "ranges", "shape")

    def __init__(self) -> None:
        self.shape: tuple[int, ...] | None = None
        self.ranges: list[list[int]] | None = None
        self.dtype: Any = None
        self.device: Any = None

    def observe(self, tensor: Any) -> bool:
        """Record ``tensor``; whether it was new: a dim outside the ranges seen, another
        number of dims, dtype or device (a batch size seen before is nothing new)."""
        shape = tensor.shape  # a torch.Size: a tuple
        dtype = tensor.dtype
        device = tensor.device
        new: bool = dtype is not self.dtype or device != self.device  # dtypes are singletons
        self.dtype = dtype
        self.device = device
        if shape == self.shape:
            return new
        ranges = self.ranges
        if self.shape is None:
            self.ranges = [[int(d), int(d)] for d in shape]
            new = True
        elif ranges is not None:  # (None: the number of dims varied, nothing more is kept)
            if len(ranges) == len(shape):
                for bounds, dim in zip(ranges, shape, strict=True):
                    if dim < bounds[0]:
                        bounds[0] = int(dim)
                        new = True
                    elif dim > bounds[1]:
                        bounds[1] = int(dim)
                        new = True
            else:
                self.ranges = None  # the number of dims varied
                new = True
        self.shape = shape
        return new

    def would_be_new(self, tensor: Any) -> bool:
        """What :meth:`observe` would say, without recording."""
        shape = tensor.shape
        ranges = self.ranges
        if shape != self.shape and ranges is not None:
            if len(ranges) != len(shape):
                return True
            for bounds, dim in zip(ranges, shape, strict=True):
                if dim < bounds[0] or dim > bounds[1]:
                    return True
        return bool(tensor.dtype is not self.dtype or tensor.device != self.device)

    def to_json(self) -> dict[str, Any]:
        varied = self.ranges is not None and any(lo != hi for lo, hi in self.ranges)
        return {
            "shape": None if self.shape is None else [int(d) for d in self.shape],
            "dim_ranges": [list(b) for b in self.ranges] if varied and self.ranges else None,
            "dtype": values.dtype_name(self.dtype),
            "device": values.device_name(self.device),
        }


class ModuleStats:
    __slots__ = (
        "all_sharded", "calls", "calls_before", "calls_from", "estimated", "inputs", "located",
        "module", "outputs", "pace", "pace_calls", "pace_hits", "paced_from", "param_bytes",
        "params", "quiet_from", "run", "run_calls", "shard_bytes", "spell", "tick", "woke_at",
    )  # fmt: skip

    def __init__(self, module: Any) -> None:
        self.module = module  # held: a freed module's id could be given to another
        self.calls = 0
        """Calls seen (while the tree watched)."""
        self.estimated = 0.0
        """Calls estimated in the tree's quiet spells that ended."""
        self.run = -1
        self.run_calls = 0
        """The tree's run of calls with nothing new it last joined, and its calls in it."""
        self.spell = -1
        """The tree's waking spell it was last called in."""
        self.pace: Pace | None = None
        self.pace_calls = 0
        self.pace_hits = 0
        """Calls seen, and hits of its pace, while watched: the calls per hit."""
        self.paced_from = 0
        self.calls_from = 0
        """Its pace's hits and its calls when its first call since the tree woke began."""
        self.tick = 0
        self.calls_before = 0
        """Its pace's hits at its last call, and its calls before that hit's first call."""
        self.woke_at = -1
        """Its pace's hits when the tree last woke: a spell that ended within a hit estimated
        that hit whole, so calls seen in it after waking are not counted twice."""
        self.quiet_from: int | None = None
        """Its pace when the quiet spell began (None: watched)."""
        self.inputs: list[TensorSlot] = []
        self.outputs: list[TensorSlot] = []
        self.params: tuple[int, int] | None = None
        self.param_bytes: int | None = None
        self.shard_bytes: int | None = None
        self.all_sharded = False
        """Every parameter was a shard when last counted (FSDP2 between its unshards)."""
        """Sharded parameters (FSDP2): the bytes of them this rank holds."""
        self.located: tuple[str, Any, Any] | None = None
        """(path, declared, forward), worked out once per path: the flusher thread would
        otherwise search the sources on every flush, holding the GIL from the program."""


def estimated_since_quiet(stats: ModuleStats) -> float:
    """Calls of the running quiet spell: its calls per hit of its pace, times the hits."""
    if stats.quiet_from is None or stats.pace is None or stats.pace_hits == 0:
        return 0.0
    return stats.pace_calls / stats.pace_hits * max(0, hits_of(stats.pace) - stats.quiet_from)


def hits_of(pace: Pace) -> int:
    """The pace's hits, less a loop header's last hit each time its loop ended (no body)."""
    hits, exits, line = pace
    return hits.get(line, 0) - exits.get(line, 0)


def observe_call(stats: ModuleStats, args: Any, output: Any, tensor: type) -> bool:
    """A call's tensors into its module's slots; whether one was new. This runs on every
    module call of the program: no generators, no kind lookups."""
    try:
        new = _observe(stats.inputs, args if type(args) is tuple else (args,), tensor)
        if isinstance(output, tensor):
            output = (output,)
        elif isinstance(output, dict):
            output = output.values()  # a HuggingFace ModelOutput is a dict
        elif not isinstance(output, (tuple, list)):
            return new
        return _observe(stats.outputs, output, tensor) or new
    except Exception:
        return False  # an odd tensor subclass: the call still counts


def _observe(slots: list[TensorSlot], items: Any, tensor: type) -> bool:
    """The tensors among ``items`` (a call's arguments, or its results one level deep) into
    ``slots``, the first :data:`MAX_SLOTS`; whether one was new."""
    index = 0
    new = False
    for item in items:
        if isinstance(item, tensor):
            if index == len(slots):
                if index == MAX_SLOTS:
                    return new
                slots.append(TensorSlot())
            new = slots[index].observe(item) or new
            index += 1
    return new
