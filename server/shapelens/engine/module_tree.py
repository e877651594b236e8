"""The model as it ran: every ``nn.Module`` call, seen as ``Module._call_impl`` returns.

The tracing backend reports each return of torch's ``Module._call_impl`` (the frame every
module call runs in) to :meth:`ModuleTree.returned`, which counts the call and reads the
shapes of the tensors that went in and came out. No hook is registered: a global forward
hook would send every module call down torch's slower ``_call_impl`` path (three more
Python frames, each an event under ``sys.settrace``), measured at 25 µs a call on 3.11
against ~3 µs for this. Paths from the root (``transformer.h.0.attn``), parameter counts and
where each module was declared are worked out when the records are sent, not per call."""

from __future__ import annotations

import os
from collections.abc import Callable
from types import CodeType, FrameType, ModuleType
from typing import Any, Protocol

from shapelens.engine import values
from shapelens.engine.after_import import when_imported
from shapelens.engine.scope import UserCodeScope
from shapelens.engine.source_map import SourceMaps, declared_in_class
from shapelens.trace import messages

MAX_MODULES = 5000
"""Modules created in a loop (a fresh ``nn.Linear`` per step) would grow without bound."""
MAX_SLOTS = 8
"""Tensors recorded per call, in and out (the first ones)."""
WRAPPERS = {"DistributedDataParallel": "module", "DataParallel": "module",
            "OptimizedModule": "_orig_mod"}  # fmt: skip
"""Wrappers shown as the model they wrap (their attribute holding it)."""


class ReturnWatch(Protocol):
    """A tracing backend that can report the returns of one code object of library code."""

    def watch_returns(self, code: CodeType, on_return: Callable[[FrameType, Any], None]) -> None:
        """Call ``on_return(frame, value)`` whenever a frame of ``code`` returns a value."""


class TensorSlot:
    """One argument or result position of a module: its shape over every call."""

    __slots__ = ("device", "dtype", "ranges", "shape")

    def __init__(self) -> None:
        self.shape: tuple[int, ...] | None = None
        self.ranges: list[list[int]] | None = None
        self.dtype: Any = None
        self.device: Any = None

    def observe(self, tensor: Any) -> None:
        shape = tensor.shape  # a torch.Size: a tuple
        self.dtype = tensor.dtype
        self.device = tensor.device
        if shape == self.shape:
            return
        if self.shape is None:
            self.ranges = [[int(d), int(d)] for d in shape]
        elif self.ranges is not None and len(self.ranges) == len(shape):
            for bounds, dim in zip(self.ranges, shape, strict=True):
                bounds[0] = min(bounds[0], int(dim))
                bounds[1] = max(bounds[1], int(dim))
        else:
            self.ranges = None  # the number of dims varied
        self.shape = shape

    def to_json(self) -> dict[str, Any]:
        varied = self.ranges is not None and any(lo != hi for lo, hi in self.ranges)
        return {
            "shape": None if self.shape is None else [int(d) for d in self.shape],
            "dim_ranges": [list(b) for b in self.ranges] if varied and self.ranges else None,
            "dtype": values.dtype_name(self.dtype),
            "device": values.device_name(self.device),
        }


class ModuleStats:
    __slots__ = ("calls", "inputs", "located", "module", "outputs", "params")

    def __init__(self, module: Any) -> None:
        self.module = module  # held: a freed module's id could be given to another
        self.calls = 0
        self.inputs: list[TensorSlot] = []
        self.outputs: list[TensorSlot] = []
        self.params: tuple[int, int] | None = None
        self.located: tuple[str, Any, Any] | None = None
        """(path, declared, forward), worked out once per path: the flusher thread would
        otherwise search the sources on every flush, holding the GIL from the program."""


class ModuleTree:
    """Records module calls once torch is imported; :meth:`drain` gives the channel message."""

    def __init__(self, scope: UserCodeScope, sources: SourceMaps) -> None:
        self.scope = scope
        self.sources = sources
        self._stats: dict[int, ModuleStats] = {}
        self._changed = False
        self._layout: list[tuple[ModuleStats, str]] | None = None
        """(stats, path) in tree order; worked out again when a new module was called."""
        self._tensor: type = type(None)  # torch.Tensor, once torch is imported

    def install(self, backend: ReturnWatch) -> None:
        """Record module calls through ``backend`` once torch is imported."""

        def on_torch(torch: ModuleType) -> None:
            call = getattr(torch.nn.Module, "_call_impl", None)
            code = getattr(call, "__code__", None)
            if code is None or "self" not in code.co_varnames or "args" not in code.co_varnames:
                return  # a torch whose module calls we do not know how to see: no tree
            self._tensor = torch.Tensor
            backend.watch_returns(code, self.returned)

        when_imported("torch", on_torch)

    def returned(self, frame: FrameType, output: Any) -> None:
        """A ``Module._call_impl`` frame returned ``output`` (a trace callback: no events)."""
        local = frame.f_locals
        module = local.get("self")
        args = local.get("args")
        if module is None:
            return
        stats = self._stats.get(id(module))
        if stats is None:
            if len(self._stats) >= MAX_MODULES:
                return
            stats = self._stats[id(module)] = ModuleStats(module)
            self._layout = None
        stats.calls += 1
        self._changed = True
        tensor = self._tensor
        try:  # this runs on every module call of the program: no generators, no kind lookups
            _observe(stats.inputs, args if type(args) is tuple else (args,), tensor)
            if isinstance(output, tensor):
                output = (output,)
            elif isinstance(output, dict):
                output = output.values()  # a HuggingFace ModelOutput is a dict
            elif not isinstance(output, (tuple, list)):
                return
            _observe(stats.outputs, output, tensor)
        except Exception:
            pass  # an odd tensor subclass: the call still counts

    # -- sending -------------------------------------------------------------------------
    def drain(self) -> messages.Message | None:
        """The whole tree when a call happened since the last drain, else None."""
        if not self._changed:
            return None
        self._changed = False
        try:
            layout = self._layout = self._layout or self._lay_out()
            return messages.modules([self._entry(stats, path) for stats, path in layout])
        except Exception:
            self._changed = True  # a module changed while we read it: next time
            return None

    def _lay_out(self) -> list[tuple[ModuleStats, str]]:
        """Every recorded module with its path from its root, roots in the order their first
        call began (a hook runs when a call ends: a root's innermost module comes first)."""
        seen = dict(self._stats)
        order = {key: index for index, key in enumerate(seen)}
        inner: set[int] = set()
        began: dict[int, int] = {}
        for key, stats in list(seen.items()):
            began[key] = order[key]
            for _, sub in stats.module.named_modules():
                if sub is not stats.module and id(sub) in seen:
                    inner.add(id(sub))
                    began[key] = min(began[key], order[id(sub)])
        layout: list[tuple[ModuleStats, str]] = []
        placed: set[int] = set()
        roots = sorted((s for key, s in seen.items() if key not in inner),
                       key=lambda s: began[id(s.module)])  # fmt: skip
        for root in roots:
            module = _unwrapped(root.module, seen)  # the wrapper itself is not shown
            for name, sub in module.named_modules():
                key = id(sub)
                if key in seen and key not in placed:
                    placed.add(key)
                    layout.append((seen[key], name))
        return layout

    def _entry(self, stats: ModuleStats, path: str) -> dict[str, Any]:
        module = stats.module
        if stats.params is None:
            total = trainable = 0
            for parameter in module.parameters():
                count = int(parameter.numel())
                total += count
                trainable += count if parameter.requires_grad else 0
            stats.params = (total, trainable)
        if stats.located is None or stats.located[0] != path:
            stats.located = (path, self._declared(stats, path), _forward_of(module))
        return {
            "path": path,
            "class": type(module).__name__,
            "params": stats.params[0],
            "trainable_params": stats.params[1],
            "calls": stats.calls,
            "inputs": [slot.to_json() for slot in stats.inputs],
            "outputs": [slot.to_json() for slot in stats.outputs],
            "declared": stats.located[1],
            "forward": stats.located[2],
        }

    def _declared(self, stats: ModuleStats, path: str) -> dict[str, Any] | None:
        """``self.attn = ...`` in the nearest enclosing module whose class is user code
        (``transformer.h.0`` was declared by ``self.transformer = ...`` of the GPT)."""
        if not path:
            return None
        root = self._root_of(stats, path)
        if root is None:
            return None
        parts = path.split(".")
        for depth in range(len(parts) - 1, -1, -1):
            try:
                owner = root.get_submodule(".".join(parts[:depth]))
            except Exception:
                return None
            found = declared_in_class(self.sources, self.scope, owner, parts[depth])
            if found is not None:
                return {"file": found[0], "line": found[1]}
        return None

    def _root_of(self, stats: ModuleStats, path: str) -> Any:
        for candidate, candidate_path in self._layout or ():
            if candidate_path == "":
                with_path = _submodule(candidate.module, path)
                if with_path is stats.module:
                    return candidate.module
        return None


def _submodule(root: Any, path: str) -> Any:
    try:
        return root.get_submodule(path)
    except Exception:
        return None


def _unwrapped(module: Any, seen: dict[int, ModuleStats]) -> Any:
    """A DDP / compiled wrapper → the model it wraps."""
    attribute = WRAPPERS.get(type(module).__name__)
    inner = getattr(module, attribute, None) if attribute else None
    return inner if inner is not None and id(inner) in seen else module


def _forward_of(module: Any) -> dict[str, Any] | None:
    forward = getattr(type(module), "forward", None)
    code = getattr(forward, "__code__", None)
    if code is None or code.co_filename.startswith("<"):
        return None
    return {"file": os.path.realpath(code.co_filename), "line": code.co_firstlineno}


def _observe(slots: list[TensorSlot], items: Any, tensor: type) -> None:
    """The tensors among ``items`` (a call's arguments, or its results one level deep) into
    ``slots``, the first :data:`MAX_SLOTS`."""
    index = 0
    for item in items:
        if isinstance(item, tensor):
            if index == len(slots):
                if index == MAX_SLOTS:
                    return
                slots.append(TensorSlot())
            slots[index].observe(item)
            index += 1
