"""Every private torch name ShapeLens touches, in one place, for torch 2.4 to 2.14.

torch's public API does not offer what a tracer needs (the function-mode stack, the
code every module call runs, fake tensors, dynamo's per-code skip flag), so these are
private names that change between releases. Each function says which versions need which
branch; ``tests/test_torch_compat.py`` fails when another module of the package names one,
and the compatibility stage (``make test-compat``) runs the oldest and newest torch.

Nothing here imports torch: each function takes the loaded ``torch`` (or its objects).
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable, Iterable
from types import CodeType, TracebackType
from typing import Any

LAZY_MODULES = ("torch._dynamo", "torch.profiler._cupti_monitor", "torch.utils.data")
"""What torch imports only when first used (``optimizer.step()`` pulls in ``torch._dynamo``:
about 1 s): the warm runner imports them once. A build without one skips it."""

MODULE_APPLY = "_apply"
"""``nn.Module``'s method behind ``.to()``, ``.cuda()``, ``.half()`` (every 2.x)."""


# -- torch function modes (torch._C's stack: the same five functions in 2.0 to 2.14) -------
MODULE_CALL_FRAME = "_call_impl"
"""The function of ``nn.Module.__call__`` whose frame calls ``forward`` (every 2.x)."""
MODULE_CALL_ENTRIES = ("_wrapped_call_impl", MODULE_CALL_FRAME)
"""The functions ``nn.Module.__call__`` enters first, newest first, each with ``self``,
``args`` and ``kwargs`` among its locals (``_wrapped_call_impl`` since 2.1)."""
MODULE_CALL_HELPER = "inner"
"""A module call with hooks (the module's, or global ones) runs ``forward`` from a function
nested in ``_call_impl`` of this name (2.5 and newer; 2.4 calls it from ``_call_impl``)."""
MODULE_FILE = ("nn", "modules", "module.py")
"""Where ``nn.Module`` is, under torch's folder."""
PUBLIC_NAMESPACE_OF = {
    "torch.nn.functional": "F",
    "torch._C._nn": "F",
    "torch._C._linalg": "torch.linalg",
    "torch._C._fft": "torch.fft",
    "torch._C._special": "torch.special",
}
"""The module a torch function says it is from → where users call it from."""


def function_mode_depth(torch: Any) -> int:
    return int(torch._C._len_torch_function_stack())


def push_function_mode(torch: Any, mode: Any) -> None:
    torch._C._push_on_torch_function_stack(mode)


def top_function_mode(torch: Any) -> Any:
    """The innermost torch function mode, or None."""
    depth = function_mode_depth(torch)
    return torch._C._get_function_stack_at(depth - 1) if depth else None


def pop_function_mode(torch: Any) -> None:
    torch._C._pop_torch_function_stack()


def before_next_module_call_or_step(torch: Any, callback: Callable[[], None]) -> Callable[[], None]:
    """Call ``callback()`` before each module call and optimizer step (global hooks, public
    since torch 2.0), outside any torch function mode's handler; returns what removes them.
    Both or neither are registered."""
    modules = sys.modules[torch.nn.Module.__module__]  # torch.nn.modules.module
    optimizers = sys.modules[torch.optim.Optimizer.__module__]  # not an attribute of optim
    handles = [modules.register_module_forward_pre_hook(lambda *_: callback())]
    try:
        handles.append(optimizers.register_optimizer_step_pre_hook(lambda *_: callback()))
    except Exception:
        handles[0].remove()
        raise

    def remove() -> None:
        for handle in handles:
            handle.remove()

    return remove


ACCOUNTS_ONLY = "shapelens_accounts_only"
"""Set on the class of a dispatch mode that only looks (the memory watch): it changes no
result, so ShapeLens's own reads of real values (a NaN scan) may run under it."""


def dispatch_mode_active(torch: Any) -> bool:
    """A dispatch mode (fake tensors, a user's mode) is active, other than ShapeLens's memory
    watch. Every 2.x has the stack's length; a build without it counts as none."""
    length = getattr(torch._C, "_len_torch_dispatch_stack", None)
    if length is None:
        return False
    mode_at = getattr(torch._C, "_get_dispatch_stack_at", None)
    if mode_at is None:
        return bool(length())
    return any(not getattr(mode_at(i), ACCOUNTS_ONLY, False) for i in range(length()))


# -- nn.Module -----------------------------------------------------------------------------
def module_call_code(module_class: type) -> CodeType | None:
    """The code every module call runs, with ``self`` and ``args`` among its locals:
    ``_wrapped_call_impl`` (torch ≥ 2.1, so every supported version), else ``_call_impl``
    (torch 2.0)."""
    for name in MODULE_CALL_ENTRIES:
        code = getattr(getattr(module_class, name, None), "__code__", None)
        if code is not None and {"self", "args"} <= set(code.co_varnames):
            return code  # type: ignore[no-any-return]
    return None


MODULE_REGISTRIES = ("_parameters", "_buffers", "_modules")
"""Where an ``nn.Module`` keeps its parameters, buffers and children (every 2.x)."""
COMPILED_MODEL = "_orig_mod"
"""The attribute of ``torch.compile``'s ``OptimizedModule`` holding the model (every 2.x)."""


def is_module_state(table: dict[str, Any]) -> bool:
    """``table`` (an object's ``__dict__``) is an ``nn.Module``'s: it holds its parameters."""
    return MODULE_REGISTRIES[0] in table


def own_parameters(module: Any) -> dict[str, Any]:
    """The module's own parameters by name, ``None`` entries included (the live dict)."""
    return module._parameters  # type: ignore[no-any-return]


def own_buffers(module: Any) -> dict[str, Any]:
    """The module's own buffers by name (the live dict)."""
    return module._buffers  # type: ignore[no-any-return]


def children_by_name(module: Any) -> dict[str, Any]:
    """The module's direct children by name (the live dict)."""
    return module._modules  # type: ignore[no-any-return]


def apply_to(module: Any, fn: Callable[[Any], Any]) -> Any:
    return getattr(module, MODULE_APPLY)(fn)


# -- fake tensors (torch._subclasses: the same names in 2.4 to 2.14) -----------------------
def fake_tensor_types() -> tuple[type, type]:
    """(FakeTensor, FakeTensorMode)."""
    from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode

    return FakeTensor, FakeTensorMode


FAKE_TENSOR_WARNINGS = ("Accessing the data pointer of FakeTensor",)
"""What torch warns about a fake tensor itself (regexes matched at a message's start)."""


def data_dependent_size_error() -> type[BaseException]:
    """What a fake kernel raises for an op whose result's size depends on the data
    (``nonzero``, a boolean mask)."""
    from torch._subclasses.fake_tensor import DynamicOutputShapeException

    return DynamicOutputShapeException


def pack_padded_sequence_op(torch: Any) -> Any:
    """The op behind ``nn.utils.rnn.pack_padded_sequence`` (its sizes are the lengths'
    values); None where torch has no such op."""
    return getattr(torch, "_pack_padded_sequence", None)


def data_dependent_value_error() -> type[BaseException]:
    """What a fake kernel raises where it needs a tensor's value (``torch.allclose``, an index
    that is a 0-dim tensor)."""
    from torch._subclasses.fake_tensor import DataDependentOutputException

    return DataDependentOutputException


def gc_clears_live_fake_tensors(torch: Any) -> bool:
    """torch 2.4: the cyclic garbage collector can empty the ``__dict__`` of a FakeTensor that
    autograd still holds, and the backward pass fails with "'FakeTensor' object has no
    attribute 'fake_mode'" (seen in clean programs under the tracer, which changes when
    collections happen; not seen on 2.6 and newer)."""
    return version(torch) < (2, 5)


def version(torch: Any) -> tuple[int, int]:
    """(major, minor) of the loaded torch: ``"2.4.1+cu121"`` is (2, 4)."""
    found = re.match(r"(\d+)\.(\d+)", str(getattr(torch, "__version__", "")))
    return (int(found[1]), int(found[2])) if found else (0, 0)


def replay_fake_mode() -> Any:
    """A fake mode that takes real tensors too (a module's parameters met during a replay of
    a failing statement): it computes metadata only."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    return FakeTensorMode(allow_non_fake_inputs=True)


FAKE_TENSOR_LOGGER = "torch._subclasses.fake_tensor"
"""Where fake kernels log a failure they re-raise (a traceback on stderr, every version)."""


def unset_fake_temporarily() -> Any:
    """A context in which tensors are made real again."""
    from torch._subclasses.fake_tensor import unset_fake_temporarily as unset

    return unset()


def is_fake_device_error(err: BaseException) -> bool:
    """The fake kernels' device check failed: ``FakeTensorDeviceMismatchError``, a
    RuntimeError (torch 2.13). Where torch has no such class (2.4) the check raises a plain
    RuntimeError, worded as :data:`FAKE_DEVICE_ERROR`."""
    from torch._subclasses import fake_tensor

    mismatch = getattr(fake_tensor, "FakeTensorDeviceMismatchError", None)
    return mismatch is not None and isinstance(err, mismatch)


def is_stand_in(tensor_type: type) -> bool:
    """FakeTensor, FunctionalTensor: stand-ins while torch.compile/export trace user code."""
    return tensor_type.__module__.startswith("torch._subclasses.")


def tree_leaves(tree: Any) -> list[Any]:
    from torch.utils._pytree import tree_leaves as leaves

    return leaves(tree)


def tree_leaves_with_paths(tree: Any) -> list[tuple[str, Any]]:
    """Each leaf of ``tree`` with its path as Python writes it (``[0]``, ``['mask']``,
    ``.logits``): the same names 2.4 to 2.14."""
    from torch.utils._pytree import keystr, tree_flatten_with_path

    return [(keystr(path), leaf) for path, leaf in tree_flatten_with_path(tree)[0]]


def tree_map(fn: Callable[[Any], Any], tree: Any) -> Any:
    from torch.utils._pytree import tree_map as map_leaves

    return map_leaves(fn, tree)


def data_loader_patches(
    real_numbers: Callable[[Callable[..., Any]], Callable[..., Any]],
) -> list[tuple[Any, str, Any]]:
    """(owner, name, replacement): batches made in this process, with the sampler's indices
    and seeds real numbers (``_BaseDataLoaderIter`` and ``_get_iterator``: every 2.x)."""
    from torch.utils.data import dataloader

    base = dataloader._BaseDataLoaderIter
    single = dataloader._SingleProcessDataLoaderIter
    return [
        (base, "__init__", real_numbers(base.__init__)),
        (base, "_next_index", real_numbers(base._next_index)),
        (dataloader.DataLoader, "_get_iterator", lambda loader: single(loader)),
    ]


def data_loader_fetch(tb: TracebackType | None) -> tuple[Any, Any, Any, Any] | None:
    """(dataset, collate function, the samples it was given, their dataset indices or None)
    of the DataLoader fetch that ``tb`` passes through, in this process: the frame of
    ``_MapDatasetFetcher.fetch`` or ``_IterableDatasetFetcher.fetch``, which has fetched the
    samples (``data``) and called the collate function on them (every 2.x)."""
    fetch = sys.modules.get("torch.utils.data._utils.fetch")
    if fetch is None:
        return None
    codes = (fetch._MapDatasetFetcher.fetch.__code__, fetch._IterableDatasetFetcher.fetch.__code__)
    while tb is not None:
        frame = tb.tb_frame
        if frame.f_code in codes:
            local = frame.f_locals
            fetcher, samples = local.get("self"), local.get("data")
            if fetcher is None or not isinstance(samples, list):
                return None
            indices = local.get("possibly_batched_index")
            map_style = frame.f_code is codes[0]
            return fetcher.dataset, fetcher.collate_fn, samples, indices if map_style else None
        tb = tb.tb_next
    return None


# -- DataLoader workers (torch.utils.data.dataloader: the same names in 2.4 to 2.14) -------
def remember_worker_batches(
    dataloader: Any, remember: Callable[[Any, int, Any], None]
) -> Callable[[], None]:
    """``remember(iterator, send index, dataset indices)`` for each batch a multi-process
    DataLoader iterator takes from its sampler for a worker (``_next_index``; ``_send_idx``
    numbers the batch it sends next). Returns what puts the class back as it was."""
    iterator_type = dataloader._MultiProcessingDataLoaderIter
    base = dataloader._BaseDataLoaderIter
    own = iterator_type.__dict__.get("_next_index")

    def _next_index(self: Any) -> Any:
        index = base._next_index(self) if own is None else own(self)
        try:  # noqa: SIM105 - never an error of ours in the program's loop
            remember(self, self._send_idx, index)
        except Exception:
            pass
        return index

    iterator_type._next_index = _next_index

    def restore() -> None:
        if iterator_type.__dict__.get("_next_index") is not _next_index:
            return  # replaced after us: theirs stays
        if own is None:
            del iterator_type._next_index
        else:
            iterator_type._next_index = own

    return restore


def worker_failure(tb: TracebackType | None) -> tuple[Any, int, Any] | None:
    """(the multi-process DataLoader iterator, the send index of the batch, the worker's
    ``ExceptionWrapper``) of an error a worker sent back for a map-style dataset, raised
    again in this process: the frame of ``_process_data`` (every 2.x), called once the batch
    was counted as received (``_rcvd_idx``; batches come in order unless ``in_order`` is
    off, 2.6 and newer)."""
    dataloader = sys.modules.get("torch.utils.data.dataloader")
    if dataloader is None:
        return None
    iterator_type = dataloader._MultiProcessingDataLoaderIter
    code = iterator_type._process_data.__code__
    while tb is not None:
        frame = tb.tb_frame
        if frame.f_code is code:
            local = frame.f_locals
            iterator, wrapper = local.get("self"), local.get("data")
            if not isinstance(iterator, iterator_type) or not hasattr(wrapper, "exc_msg"):
                return None
            if not getattr(iterator, "_in_order", True):
                return None
            if iterator._dataset_kind != dataloader._DatasetKind.Map:
                return None  # each worker iterates its own copy: no indices to fetch again
            return iterator, iterator._rcvd_idx - 1, wrapper
        tb = tb.tb_next
    return None


def fetch_in_this_process(iterator: Any, index: Any) -> Any:
    """The batch of dataset ``index``, fetched and collated here as ``iterator``'s workers
    fetch it (``_DatasetKind.create_fetcher``, every 2.x): raises as they raised, for the
    same samples."""
    dataloader = sys.modules["torch.utils.data.dataloader"]
    fetcher = dataloader._DatasetKind.create_fetcher(
        iterator._dataset_kind,
        iterator._dataset,
        iterator._auto_collation,
        iterator._collate_fn,
        iterator._drop_last,
    )
    return fetcher.fetch(index)


# -- autograd graphs (every 2.x) -------------------------------------------------------------
def version_of(tensor: Any) -> int:
    """How many times ``tensor`` was changed in place (autograd's version counter)."""
    return int(tensor._version)


# -- dynamo --------------------------------------------------------------------------------
def skip_in_dynamo(torch: Any, codes: Iterable[CodeType]) -> bool:
    """Mark ``codes`` "skip, and skip what they call" for dynamo's frame hook: a C flag per
    code object (``set_code_exec_strategy``: in 2.13 and 2.14, not yet in 2.4 or 2.6).
    False on a torch without it: the non-finite scan then stands aside while compiling."""
    try:
        eval_frame = torch._C._dynamo.eval_frame
        action = eval_frame._FrameAction.SKIP
        strategy = eval_frame._FrameExecStrategy(action, action)
        for code in codes:
            eval_frame.set_code_exec_strategy(code, strategy)
    except (AttributeError, ImportError, RuntimeError, TypeError):
        return False
    return True


# -- memory and FLOPs (engine/memory) --------------------------------------------------------
def dispatch_mode_class() -> type:
    """The base class of a torch dispatch mode (``torch.utils._python_dispatch``, 2.0 to
    2.14)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    return TorchDispatchMode


def storage_key(storage: Any) -> int:
    """A storage's identity while it lives: its C++ object's address (``_cdata``, every 2.x;
    torch's ``MemTracker`` keys storages the same way)."""
    return int(storage._cdata)


def flop_formulas() -> dict[Any, Callable[..., int]]:
    """aten op (``OpOverloadPacket``) → its FLOPs formula, called as ``FlopCounterMode``
    does: ``formula(*args, **kwargs, out_val=out)`` (``torch.utils.flop_counter``'s
    ``flop_registry``, 2.2 to 2.14)."""
    from torch.utils.flop_counter import flop_registry

    formulas: dict[Any, Callable[..., int]] = flop_registry
    return formulas


def op_packet(func: Any) -> Any:
    """The ``OpOverloadPacket`` of an op overload (``aten.mm`` of ``aten.mm.default``)."""
    return func._overloadpacket


def onednn_rnn_layer(torch: Any) -> Any:
    """oneDNN's LSTM layer on the CPU (``aten.mkldnn_rnn_layer.default``, 2.1 to 2.14; None
    before): its fake kernel returns an empty workspace where the real one keeps megabytes."""
    packet = getattr(torch.ops.aten, "mkldnn_rnn_layer", None) if hasattr(torch, "ops") else None
    return getattr(packet, "default", None)


# -- collectives (torch.distributed) --------------------------------------------------------
LEGACY_COLLECTIVES = {
    "_all_gather_base": ("output_tensor", "input_tensor"),
    "_reduce_scatter_base": ("output", "input"),
}
"""Collectives under their old private names (2.4 and newer keep them, deprecated), with the
arguments every rank must pass alike."""


DEVICE_MESH_MODULE = "torch.distributed.device_mesh"
"""Where ``DeviceMesh`` is (2.2 and newer): built from the ranks' numbers, which a shape-only
run keeps real."""


# -- sharded tensors (DTensor: torch.distributed.tensor since 2.5, ._tensor in 2.4) --------
DTENSOR_MODULES = ("torch.distributed.tensor", "torch.distributed._tensor")
"""Where ``DTensor`` is defined (``torch.distributed.tensor._api`` since 2.5,
``torch.distributed._tensor.api`` in 2.4)."""


def sharding_possible() -> bool:
    """A rank of a distributed run (``WORLD_SIZE`` above 1, as torchrun sets it) that loaded
    DTensor (FSDP2 and tensor parallel import it): parameters may be shards."""
    if not any(name in sys.modules for name in DTENSOR_MODULES):
        return False
    try:
        return int(os.environ.get("WORLD_SIZE", "1")) > 1
    except ValueError:
        return False


def is_sharded_type(tensor_type: type) -> bool:
    """A ``DTensor``: a global tensor of which each rank holds a shard (FSDP2's parameters,
    ``distribute_tensor``, tensor parallel)."""
    return tensor_type.__name__ == "DTensor" and tensor_type.__module__.startswith(DTENSOR_MODULES)


def sharding(dtensor: Any) -> tuple[str, tuple[int, ...]] | None:
    """A DTensor's placements (``Shard(0)``; ``(Shard(0), Replicate())`` on a 2-D mesh) and
    this rank's local shape, from its metadata alone; None where they cannot be read."""
    try:
        placements = tuple(dtensor.placements)
        local = dtensor._local_tensor  # the shard itself (to_local() would record an op)
        local_shape = tuple(int(d) for d in local.shape)
    except Exception:
        return None
    texts = [_placement_text(p) for p in placements]
    text = texts[0] if len(texts) == 1 else "(" + ", ".join(texts) + ")"
    return text, local_shape


def _placement_text(placement: Any) -> str:
    """``Shard(0)``, ``Replicate()``, ``Partial(sum)`` (torch writes ``Shard(dim=0)``)."""
    dim = getattr(placement, "dim", None)
    if type(placement).__name__.endswith("Shard") and isinstance(dim, int):
        return f"{type(placement).__name__}({dim})"
    return repr(placement)


def local_shard(tensor: Any) -> Any:
    """This rank's shard of a DTensor (a plain tensor: checking its values runs no
    collective); any other tensor as it is."""
    if is_sharded_type(type(tensor)):
        return tensor._local_tensor
    return tensor
