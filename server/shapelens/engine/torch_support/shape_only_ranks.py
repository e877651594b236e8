"""A shape-only run of a distributed program: each rank on fake tensors, the ranks still in
step.

Fake tensors have no data to exchange, so a collective on them is not sent: their fake
kernels leave the outputs with their shapes (an all-gather writes into a buffer the caller
made), and what each rank passed is still recorded and compared across ranks
(``collectives.py``), so a mismatch is found without a byte of data. What the ranks must
really agree on runs for real, outside the fake mode: the device mesh (torch reads its
values to place the rank), and the collectives of Python objects and barriers (a config
broadcast from rank 0, a checkpoint barrier). A program written for NCCL gets gloo: CUDA is
simulated, and gloo carries the real exchanges above. Each rank's memory is its own: its
shards, its all-gathered parameters while a forward needs them, its gradients' shards.
DistributedDataParallel stops the run: it all-reduces gradients in C++, on data."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from shapelens.engine.torch_support import torch_compat
from shapelens.engine.torch_support.after_import import when_imported
from shapelens.engine.torch_support.value_reads import ValueReads

Patch = Callable[[Any, str, Any], None]
"""Replace ``owner.name`` until the shape-only run is removed (``ShapeOnly._patch``)."""


class CannotSimulate(Exception):
    """A part of a distributed program a shape-only run cannot carry out: its message says
    what to do instead (the run stops there, as at a value it cannot know)."""


DDP_STOP = (
    "DistributedDataParallel all-reduces gradients in C++, which needs data, so a shape-only "
    "run cannot simulate it. Each DDP rank holds the whole model: run --fake without "
    "--nproc-per-node to see one rank's memory (FSDP2 and DTensor programs run shape-only on "
    "every rank)"
)


class ShapeOnlyRanks:
    """The collectives and the device mesh of one rank of a shape-only run."""

    def install(self, torch: Any, patch: Patch, reads: ValueReads | None) -> None:
        """Once torch is imported: the device mesh on real numbers, NCCL as gloo, a sharded
        tensor's value reads on its own shard (with ``reads``' stand-ins)."""
        dist = torch.distributed
        if not dist.is_available():
            return

        def real_mesh(module: Any) -> None:
            for owner, name in ((module.DeviceMesh, "__init__"), (module, "init_device_mesh")):
                if hasattr(owner, name):
                    patch(owner, name, _on_real_numbers(getattr(owner, name)))

        when_imported(torch_compat.DEVICE_MESH_MODULE, real_mesh)
        if reads is not None:
            for name in torch_compat.DTENSOR_MODULES:
                when_imported(name, lambda module: reads.install_on_shards(module.DTensor, patch))

        def refuse(*args: Any, **kwargs: Any) -> None:
            raise CannotSimulate(DDP_STOP)

        patch(torch.nn.parallel.DistributedDataParallel, "__init__", refuse)
        init = dist.init_process_group

        def init_process_group(backend: Any = None, *args: Any, **kwargs: Any) -> Any:
            if backend is not None and "nccl" in str(backend):
                backend = str(backend).replace("nccl", "gloo")  # CUDA is simulated
            return init(backend, *args, **kwargs)

        for module in (dist, dist.distributed_c10d):
            patch(module, "init_process_group", init_process_group)

    def call(
        self, original: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        """A collective of the program, outside the fake mode: on fake tensors their own
        kernels carry it out (nothing is sent, the outputs keep their shapes); on Python
        objects (a config broadcast from rank 0) and for a barrier, real bytes are exchanged,
        as the program needs them."""
        with torch_compat.unset_fake_temporarily():
            return original(*args, **kwargs)


def _on_real_numbers(method: Callable[..., Any]) -> Callable[..., Any]:
    def on_real_numbers(*args: Any, **kwargs: Any) -> Any:
        with torch_compat.unset_fake_temporarily():
            return method(*args, **kwargs)

    return on_real_numbers
