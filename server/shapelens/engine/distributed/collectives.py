"""The collectives a rank calls, recorded as they start and end: metadata only, no data.

Each ``torch.distributed`` collective (``all_reduce``, ``all_gather``, ``broadcast``,
``barrier``, the ``_tensor``/``_into_tensor``/``_coalesced`` forms, ``send``/``recv``) is
replaced, on the module and in ``distributed_c10d``, by a wrapper that numbers the call on
its group (the n-th ``all_reduce`` of the world on every rank must meet the n-th of every
other rank), notes the tensors that must agree across ranks (their shape, dtype and device,
never their values) and the innermost line of user code, and marks it ``waiting`` until it
returns. The merge compares the ranks' n-th calls (``trace/collectives.py``).

Only the latest :data:`KEPT` calls are kept, so a run of ten million steps holds as much as
one of ten: a mismatch or a hang is among the last calls of every rank, since the ranks stop
meeting there. A call made straight from user code flushes the rank's results first: when it
is the call that aborts the process (gloo's "Received data size doesn't match"), everything
up to its line is already written.
"""

from __future__ import annotations

import contextlib
import inspect
import os
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from types import FrameType, ModuleType
from typing import Any

from shapelens.engine.torch_support import torch_compat
from shapelens.trace import messages
from shapelens.trace.messages import CollectiveRecord

KEPT = 64
"""Calls kept per rank (the latest)."""
FLUSH_GAP_S = 0.05
"""A call from user code flushes the rank's results unless it did so this recently and the
call's tensors are what they were at its line before (a new size is what aborts)."""
MAX_LIST = 8
"""Tensors of one list argument named (``tensor_list[0]`` … ``[7]``)."""

AGREEING: dict[str, tuple[str, ...]] = {
    "all_reduce": ("tensor",),
    "all_reduce_coalesced": ("tensors",),
    "broadcast": ("tensor",),
    "reduce": ("tensor",),
    "all_gather": ("tensor", "tensor_list"),
    "all_gather_into_tensor": ("output_tensor", "input_tensor"),
    "all_gather_single": ("output_tensor", "input_tensor"),  # 2.13 and newer
    "all_gather_coalesced": ("input_tensor_list",),
    "reduce_scatter": ("output", "input_list"),
    "reduce_scatter_tensor": ("output", "input"),
    "reduce_scatter_single": ("output", "input"),  # 2.13 and newer
    "all_to_all_single": ("output", "input"),
    "all_to_all": (),  # each rank's pieces may differ in size by design
    "gather": ("tensor",),
    "gather_single": ("tensor",),  # 2.14
    "scatter": ("tensor",),
    "barrier": (),
    "monitored_barrier": (),
    "all_gather_object": (),  # pickled objects differ in size by design
    "broadcast_object_list": (),
    "gather_object": (),
    "scatter_object_list": (),
    "send_object_list": (),
    "recv_object_list": (),
    "send": ("tensor",),
    "recv": ("tensor",),
    "isend": ("tensor",),
    "irecv": ("tensor",),
    **torch_compat.LEGACY_COLLECTIVES,
}
"""Each collective, and its arguments whose shapes and dtypes every rank must pass alike."""
ROOTED = {
    "broadcast": "src", "reduce": "dst", "gather": "dst", "gather_single": "dst", "scatter": "src",
}  # fmt: skip
"""Collectives whose root must agree too (``broadcast(src=0)``)."""
SPLIT_SIZES = ("output_split_sizes", "input_split_sizes")
"""``all_to_all_single`` with these: each rank's sizes may differ by design."""
_SENDS = {"send": "dst", "isend": "dst", "send_object_list": "dst"}
_RECEIVES = {"recv": "src", "irecv": "src", "recv_object_list": "src"}

_TORCH_DIR = os.sep + "torch" + os.sep

UserStack = Callable[[FrameType | None], list[list[Any]]]
"""The user-code frames from a frame outwards: [file, line, function], innermost first."""


class Call:
    """One recorded call, until it is sent (a few fields change as it ends)."""

    __slots__ = (
        "error", "file", "group", "line", "op", "seq", "stack", "started", "state", "tensors",
        "user",
    )  # fmt: skip

    def __init__(
        self, group: str, seq: int, op: str, stack: list[list[Any]], tensors: list[list[Any]]
    ) -> None:
        self.group, self.seq, self.op = group, seq, op
        self.stack = stack
        self.file: str | None = stack[0][0] if stack else None
        self.line: int | None = stack[0][1] if stack else None
        self.tensors = tensors
        self.state = "waiting"
        self.error: str | None = None
        self.started = time.time()
        self.user = False
        """Called straight from user code."""

    def record(self) -> CollectiveRecord:
        return CollectiveRecord(
            self.group, self.seq, self.op, self.file, self.line, self.state, self.tensors,
            self.started, self.error, self.stack,
        )  # fmt: skip


class CollectiveLog:
    """This rank's collective calls: the latest :data:`KEPT`, the one under way, and the
    number of calls on each group so far."""

    def __init__(
        self, user_stack: UserStack, is_user_frame: Callable[[FrameType], bool],
        flush: Callable[[], None], send: Callable[[messages.Collectives], None],
    ) -> None:  # fmt: skip
        """``flush`` writes the rank's results; ``send`` writes one message at once."""
        self._user_stack = user_stack
        self._is_user_frame = is_user_frame
        self._flush = flush
        self._send = send
        self._calls: OrderedDict[tuple[str, int], Call] = OrderedDict()
        self._changed: set[tuple[str, int]] = set()
        self._counts: dict[str, int] = {}
        self._inside = False
        self.pending: Call | None = None
        """The call under way (the main thread waits in it), or None."""
        self.rank = 0
        self._dist: ModuleType | None = None
        self._replaced: list[tuple[ModuleType, str, Any]] = []
        self.run_call: Callable[[Callable[..., Any], tuple[Any, ...], dict[str, Any]], Any] | None
        self.run_call = None
        """How a collective is carried out, where not as torch does (a shape-only run's)."""
        self._last_flush = 0.0
        self._seen_at: dict[tuple[str | None, int | None, str], list[list[Any]]] = {}

    # -- installing -------------------------------------------------------------------
    def install(self, dist: ModuleType) -> None:
        """Wrap every collective of ``torch.distributed`` (the module, and the functions
        ``distributed_c10d`` calls each other through)."""
        if not getattr(dist, "is_available", lambda: False)():
            return
        self._dist = dist
        c10d = getattr(dist, "distributed_c10d", None)
        for name in AGREEING:
            original = getattr(dist, name, None) or getattr(c10d, name, None)
            if original is None or not callable(original):
                continue
            try:
                parameters = list(inspect.signature(original).parameters)
            except (TypeError, ValueError):
                continue
            wrapper = self._wrap(name, original, parameters)
            for module in (dist, c10d):
                if module is not None and getattr(module, name, None) is original:
                    self._replaced.append((module, name, original))
                    setattr(module, name, wrapper)

    def uninstall(self) -> None:
        for module, name, original in reversed(self._replaced):
            setattr(module, name, original)
        self._replaced.clear()

    def _wrap(
        self, op: str, original: Callable[..., Any], parameters: list[str]
    ) -> Callable[..., Any]:
        log = self

        def collective(*args: Any, **kwargs: Any) -> Any:
            if log._inside:  # one collective calling another (broadcast_object_list)
                return original(*args, **kwargs)
            caller = inspect.currentframe()
            caller = caller.f_back if caller is not None else None
            try:
                call = log._begin(op, parameters, args, kwargs, caller)
            except Exception:  # never let recording break the program's collective
                call = None
            log._inside = True
            try:
                run = log.run_call
                result = original(*args, **kwargs) if run is None else run(original, args, kwargs)
            except BaseException as err:
                if call is not None:
                    log._end(call, "failed", err)
                raise
            finally:
                log._inside = False
            if call is not None:
                log._end(call, "called", None)
            return result

        collective.__name__ = getattr(original, "__name__", op)
        collective.__qualname__ = getattr(original, "__qualname__", op)
        collective.__doc__ = getattr(original, "__doc__", None)
        collective.__wrapped__ = original  # type: ignore[attr-defined]
        return collective

    # -- recording --------------------------------------------------------------------
    def _begin(
        self, op: str, parameters: list[str], args: Sequence[Any], kwargs: dict[str, Any],
        caller: FrameType | None,
    ) -> Call | None:  # fmt: skip
        bound = dict(zip(parameters, args, strict=False))
        bound.update(kwargs)
        self.rank = self._world_rank()
        group, label = self._group_of(op, bound)
        if group is None:
            return None
        if caller is not None and _in_torch(caller):  # torch's own: not compared
            group += messages.INTERNAL_GROUP
        seq = self._counts.get(group, 0) + 1
        self._counts[group] = seq
        stack = self._user_stack(caller)
        tensors: list[list[Any]] = []
        compared = AGREEING[op]
        if op == "all_to_all_single" and any(bound.get(k) is not None for k in SPLIT_SIZES):
            compared = ()  # uneven splits: each rank's sizes may differ
        names = _local_names(caller, stack, self._is_user_frame)
        for parameter in compared:
            tensors.extend(_tensor_entries(bound.get(parameter), parameter, names))
        call = Call(group, seq, label, stack, tensors)
        key = (group, seq)
        self._calls[key] = call
        self._changed.add(key)
        while len(self._calls) > KEPT:
            old, _ = self._calls.popitem(last=False)
            self._changed.discard(old)
        self.pending = call
        call.user = caller is not None and self._is_user_frame(caller)
        if call.user:
            # Called from user code: its results so far are written before the call, which
            # may end the process (gloo aborts on a size mismatch).
            where = (call.file, call.line, label)
            new_sizes = self._seen_at.get(where) != tensors
            self._seen_at[where] = tensors
            now = time.monotonic()
            if new_sizes or now - self._last_flush >= FLUSH_GAP_S:
                self._last_flush = now
                with contextlib.suppress(Exception):
                    self._flush()
        return call

    def _end(self, call: Call, state: str, err: BaseException | None) -> None:
        call.state = state
        if err is not None:
            with contextlib.suppress(Exception):
                call.error = f"{type(err).__name__}: {str(err).strip().splitlines()[0]}"
        key = (call.group, call.seq)
        if self.pending is call:
            self.pending = None
        if call.user:  # a rank killed next is then not said to have died in it
            self._changed.discard(key)
            with contextlib.suppress(Exception):
                self._send(messages.collectives(self.rank, [call.record()]))
        else:
            self._changed.add(key)

    def _world_rank(self) -> int:
        dist = self._dist
        with contextlib.suppress(Exception):
            if dist is not None and dist.is_initialized():
                return int(dist.get_rank())
        return self.rank

    def _group_of(self, op: str, bound: dict[str, Any]) -> tuple[str | None, str]:
        """The group's key (what the n-th call is counted on) and the call's label."""
        if op in _SENDS or op in _RECEIVES:
            peer = bound.get(_SENDS.get(op) or _RECEIVES[op])
            if peer is None:  # recv from any source: no pair to compare with
                return f"any→{self.rank}", op
            pair = f"{self.rank}→{peer}" if op in _SENDS else f"{peer}→{self.rank}"
            return pair, op.removeprefix("i")
        group = bound.get("group")
        label = op
        root = ROOTED.get(op)
        if root is not None and bound.get(root) is not None:
            label = f"{op}({root}={bound[root]})"
        return self._group_name(group), label

    def _group_name(self, group: Any) -> str:
        """``world``, or ``ranks 0,2`` for a subgroup. Not cached by the group: holding a
        process group past ``destroy_process_group`` would leave gloo's threads to the
        interpreter's teardown (``terminate called without an active exception``)."""
        dist = self._dist
        if group is None or dist is None:
            return "world"
        with contextlib.suppress(Exception):
            ranks = list(dist.get_process_group_ranks(group))
            if ranks != list(range(dist.get_world_size())):
                return "ranks " + ",".join(map(str, ranks))
        return "world"

    # -- reading ----------------------------------------------------------------------
    def drain(self) -> messages.Collectives | None:
        """The calls that changed since the last drain."""
        if not self._changed:
            return None
        changed, self._changed = self._changed, set()
        entries = [self._calls[key].record() for key in changed if key in self._calls]
        entries.sort(key=lambda record: record.started)
        return messages.collectives(self.rank, entries)


def _in_torch(frame: FrameType) -> bool:
    """Whether the frame is torch's own code (site-packages/torch/...)."""
    return _TORCH_DIR in frame.f_code.co_filename


def _local_names(
    caller: FrameType | None, stack: list[list[Any]], is_user_frame: Callable[[FrameType], bool]
) -> dict[int, str]:
    """The names the innermost user frame gives its objects (by identity): ``stats``."""
    frame = caller
    while frame is not None and not is_user_frame(frame):
        frame = frame.f_back
    if frame is None:
        return {}
    return {id(value): name for name, value in frame.f_locals.items()}


def _tensor_entries(value: Any, parameter: str, names: dict[int, str]) -> list[list[Any]]:
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        name = names.get(id(value), parameter)
        entries = []
        for index, item in enumerate(value[:MAX_LIST]):
            entries.extend(_tensor_entries(item, f"{name}[{index}]", {}))
        return entries
    shape = getattr(value, "shape", None)
    if shape is None:
        return []
    name = names.get(id(value), parameter)
    return [
        [name, [int(d) for d in shape], str(value.dtype).removeprefix("torch."), str(value.device)]
    ]
