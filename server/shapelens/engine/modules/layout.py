"""The module tree as it is sent: every module with its path from its root
(``transformer.h.0.attn``), its parameter counts, and where it was declared and its
``forward`` defined. Worked out when the records are sent, never per call."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from shapelens.engine.modules.calls import ModuleStats, estimated_since_quiet
from shapelens.engine.recording.scope import UserCodeScope
from shapelens.engine.source.source_map import SourceMaps, declared_in_class
from shapelens.engine.torch_support import torch_compat

WRAPPERS = {"DistributedDataParallel": "module", "DataParallel": "module",
            "OptimizedModule": torch_compat.COMPILED_MODEL}  # fmt: skip
"""Wrappers shown as the model they wrap (their attribute holding it)."""

Layout = list[tuple[ModuleStats, str]]
"""(stats, path) in tree order."""


def lay_out(recorded: dict[int, ModuleStats]) -> Layout:
    """Every recorded module with its path from its root, roots in the order their first
    call began (a hook runs when a call ends: a root's innermost module comes first)."""
    seen = dict(recorded)
    order = {key: index for index, key in enumerate(seen)}
    inner: set[int] = set()
    began: dict[int, int] = {}
    for key, stats in list(seen.items()):
        began[key] = order[key]
        for _, sub in stats.module.named_modules():
            if sub is not stats.module and id(sub) in seen:
                inner.add(id(sub))
                began[key] = min(began[key], order[id(sub)])
    layout: Layout = []
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


def entry(
    stats: ModuleStats,
    path: str,
    layout: Layout,
    sources: SourceMaps,
    scope: UserCodeScope,
    cost_of: Callable[[int], dict[str, int] | None] | None = None,
    kept_for: Callable[[int], tuple[int, int]] | None = None,
) -> dict[str, Any]:
    """One module of the trace format's ``modules``, at ``path`` in ``layout``; ``cost_of``:
    a shape-only run's memory and FLOPs of its latest forward, by the module's ``id``."""
    module = stats.module
    if stats.params is None or (not stats.all_sharded and _shards_come_and_go(stats)):
        # (FSDP2 swaps a module's shards for whole parameters while they are needed: counted
        # again until every one is seen sharded)
        total = trainable = sharded = 0
        for parameter in module.parameters():
            count = int(parameter.numel())  # a DTensor's: global, so counted once
            total += count
            trainable += count if parameter.requires_grad else 0
            sharded += torch_compat.is_sharded_type(type(parameter))
        stats.params = (total, trainable)
        stats.all_sharded = sharded > 0 and sharded == len(list(module.parameters()))
        if sharded:
            stats.shard_bytes = _shard_bytes(module)
    if stats.located is None or stats.located[0] != path:
        declared = _declared(stats, path, layout, sources, scope)
        stats.located = (path, declared, _forward_of(module))
    cost = cost_of(id(module)) if cost_of is not None else None
    if cost is not None:
        if stats.param_bytes is None:  # what this rank holds: a DTensor's own shard
            stats.param_bytes = _shard_bytes(module)
        cost = {"param_bytes": stats.param_bytes, **cost, **_kept(module, kept_for)}
    return {
        **({"cost": cost} if cost is not None else {}),
        "path": path,
        "class": type(module).__name__,
        "params": stats.params[0],
        "trainable_params": stats.params[1],
        **({"shard_bytes": stats.shard_bytes} if stats.shard_bytes is not None else {}),
        "calls": stats.calls + round(stats.estimated + estimated_since_quiet(stats)),
        "calls_sampled": stats.estimated > 0 or stats.quiet_from is not None,
        "inputs": [slot.to_json() for slot in stats.inputs],
        "outputs": [slot.to_json() for slot in stats.outputs],
        "declared": stats.located[1],
        "forward": stats.located[2],
    }


def _shards_come_and_go(stats: ModuleStats) -> bool:
    """A module whose parameters may be sharded between their uses (one seen holding shards,
    or any in a distributed run that loaded DTensor): FSDP2 puts whole parameters in their
    place while a forward or backward runs."""
    return stats.shard_bytes is not None or torch_compat.sharding_possible()


def _shard_bytes(module: Any) -> int:
    """The bytes of ``module``'s parameters this rank holds (a DTensor's own shard)."""
    total = 0
    for parameter in module.parameters():
        local = torch_compat.local_shard(parameter)
        total += int(local.numel()) * local.element_size()
    return total


def _declared(
    stats: ModuleStats, path: str, layout: Layout, sources: SourceMaps, scope: UserCodeScope
) -> dict[str, Any] | None:
    """``self.attn = ...`` in the nearest enclosing module whose class is user code
    (``transformer.h.0`` was declared by ``self.transformer = ...`` of the GPT)."""
    if not path:
        return None
    root = _root_of(stats, path, layout)
    if root is None:
        return None
    parts = path.split(".")
    for depth in range(len(parts) - 1, -1, -1):
        try:
            owner = root.get_submodule(".".join(parts[:depth]))
        except Exception:
            return None
        found = declared_in_class(sources, scope, owner, parts[depth])
        if found is not None:
            return {"file": found[0], "line": found[1]}
    return None


def _root_of(stats: ModuleStats, path: str, layout: Layout) -> Any:
    for candidate, candidate_path in layout:
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


def _kept(module: Any, kept_for: Callable[[int], tuple[int, int]] | None) -> dict[str, int]:
    """What its parameters keep besides themselves: their gradients and the optimizer's
    state for them, as the memory ledger last saw them (its children's included). Read from
    the ledger: this runs on the flusher thread, and ``.grad`` is the program's to write."""
    grads = state = 0
    if kept_for is not None:
        for parameter in module.parameters():
            grad, kept = kept_for(id(parameter))
            grads += grad
            state += kept
    return {"grad_bytes": grads, "optimizer_state_bytes": state}
