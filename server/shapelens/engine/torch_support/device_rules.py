"""The device checks a real GPU makes that fake tensors skip (shape-only runs).

Fake tensors check devices where an operator's outputs are made, and some paths skip it:
an embedding's or a convolution's fake kernel takes the weight's device whatever the input's,
an in-place op keeps ``self``'s, and a CPU tensor indexed by GPU indices is not checked. A
real GPU raises at each of these (``tests/data/cuda_device_rules.py`` lists the rules; a
shape-only run is measured against them). Each check here looks at one torch call as the
program made it, before the fake kernel runs, and returns the real device's message.

The other rules (TensorIterator's "a CPU 0-dim tensor may join a GPU op", ``cat``, ``mm``,
``gather``, the losses) are the fake kernels' own, as on the device.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

SAME_DEVICE = "Expected all tensors to be on the same device, but found at least two devices"

_CONVOLUTIONS = (
    "conv1d",
    "conv2d",
    "conv3d",
    "conv_transpose1d",
    "conv_transpose2d",
    "conv_transpose3d",
)
"""In ``torch.nn.functional`` (the same functions as ``torch.conv2d`` and the others)."""
_CROSS_DEVICE_BY_DESIGN = frozenset({"copy_", "set_", "index_put_", "put_", "resize_as_"})
"""In-place methods whose operands may sit elsewhere (a copy, indices moved to the device)."""
_INPLACE_OPERATORS = frozenset({"__iand__", "__ior__", "__ixor__", "__ilshift__", "__irshift__"})
"""``x &= y`` and its kin reach a torch function mode by these names (``x += y`` as ``add_``)."""
_INDEXING, _EMBEDDING_BY_TORCH, _EMBEDDING_BY_FUNCTIONAL, _CONVOLUTION = range(4)


class DeviceRules:
    """What a GPU would raise at one torch call. ``device_of`` names a tensor's device as
    the program sees it (``cuda:0`` for a simulated GPU's tensors); ``leaves`` lists what
    nested arguments hold (torch's pytree)."""

    def __init__(
        self, torch: Any, device_of: Callable[[Any], str], leaves: Callable[[Any], list[Any]]
    ) -> None:
        self._tensor = torch.Tensor
        self._device_of = device_of
        self._leaves = leaves
        functional = torch.nn.functional
        kinds = {
            _INDEXING: [torch.Tensor.__getitem__, torch.Tensor.__setitem__],
            _EMBEDDING_BY_TORCH: [torch.embedding],
            _EMBEDDING_BY_FUNCTIONAL: [functional.embedding],
            _CONVOLUTION: [getattr(functional, name) for name in _CONVOLUTIONS],
        }
        # By identity: these live as long as torch, so their ids stay theirs.
        self._kind_of = {id(func): kind for kind, funcs in kinds.items() for func in funcs}

    def error(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str | None:
        """The message a GPU raises at ``func(*args, **kwargs)``; None where it runs, or where
        the fake kernel checks as the GPU does."""
        kind = self._kind_of.get(id(func))
        if kind == _INDEXING:
            return self._indexed_on_cpu(args)
        if kind == _EMBEDDING_BY_TORCH:
            return self._lookup_error(
                _arg(args, kwargs, 0, "weight"), _arg(args, kwargs, 1, "indices")
            )
        if kind == _EMBEDDING_BY_FUNCTIONAL:
            return self._lookup_error(
                _arg(args, kwargs, 1, "weight"), _arg(args, kwargs, 0, "input")
            )
        if kind == _CONVOLUTION:
            return self._convolution_error(args, kwargs)
        if args and isinstance(args[0], self._tensor) and _is_inplace(func):
            return self._inplace_error(args[0], (args[1:], kwargs))
        return None

    def _tensors(self, tree: Any) -> list[Any]:
        return [x for x in self._leaves(tree) if isinstance(x, self._tensor)]

    def _indexed_on_cpu(self, args: tuple[Any, ...]) -> str | None:
        """A GPU moves CPU indices to the indexed tensor's device, but GPU indices are not
        moved to the CPU."""
        if len(args) < 2 or not isinstance(args[0], self._tensor):
            return None
        if self._device_of(args[0]) != "cpu":
            return None
        if any(_on_gpu(self._device_of(index)) for index in self._tensors(args[1])):
            return (
                "indices should be either on cpu or on the same device as the indexed tensor (cpu)"
            )
        return None

    def _lookup_error(self, weight: Any, indices: Any) -> str | None:
        """An embedding is an ``index_select`` of the weight's rows: the indices must be on
        the weight's device, even a single one."""
        if not (isinstance(weight, self._tensor) and isinstance(indices, self._tensor)):
            return None
        on_weight, on_indices = self._device_of(weight), self._device_of(indices)
        if on_weight == on_indices or not _on_gpu(on_weight, on_indices):
            return None
        kernel = "CUDA" if _on_gpu(on_weight) else "CPU"
        return (
            f"{SAME_DEVICE}, {on_weight} and {on_indices}! (when checking argument for "
            f"argument index in method wrapper_{kernel}__index_select)"
        )

    def _convolution_error(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str | None:
        """Worded by the convolution, with the tensors' legacy type names."""
        given = _arg(args, kwargs, 0, "input")
        weight, bias = _arg(args, kwargs, 1, "weight"), _arg(args, kwargs, 2, "bias")
        if not (isinstance(given, self._tensor) and isinstance(weight, self._tensor)):
            return None
        on_input = self._device_of(given)
        for other, role in ((weight, "weight"), (bias, "bias")):
            if not isinstance(other, self._tensor):
                continue
            on_other = self._device_of(other)
            if on_other != on_input and _on_gpu(on_input, on_other):
                said = f"Input type ({self._type_name(given)}) and {role} type "
                said += f"({self._type_name(other)}) should be the same"
                if role == "weight":
                    said += " or input should be a MKLDNN tensor and weight is a dense tensor"
                return said
        return None

    def _type_name(self, tensor: Any) -> str:
        """``torch.cuda.FloatTensor``, as ``Tensor.type()`` names it on the device."""
        name = str(tensor.type()).rpartition(".")[2]
        return f"torch.cuda.{name}" if _on_gpu(self._device_of(tensor)) else f"torch.{name}"

    def _inplace_error(self, target: Any, operands: Any) -> str | None:
        """The result is written into ``target``: every operand must be on its device, but a
        CPU 0-dim tensor may join a GPU target (read as a number)."""
        on_target = self._device_of(target)
        for operand in self._tensors(operands):
            on_operand = self._device_of(operand)
            if on_operand == on_target or not _on_gpu(on_target, on_operand):
                continue
            if on_operand == "cpu" and operand.dim() == 0:
                continue
            # TensorIterator names the GPU (the first device that is not the CPU) first.
            gpu, other = (on_operand, on_target) if on_target == "cpu" else (on_target, on_operand)
            return f"{SAME_DEVICE}, {gpu} and {other}!"
        return None


def _is_inplace(func: Any) -> bool:
    """``x.add_(y)``, ``x += y``: a public method that writes into its first argument."""
    name = getattr(func, "__name__", "")
    if name in _INPLACE_OPERATORS:
        return True
    return name.endswith("_") and not name.startswith("_") and name not in _CROSS_DEVICE_BY_DESIGN


def _on_gpu(*devices: str) -> bool:
    return any(device.startswith("cuda") for device in devices)


def _arg(args: tuple[Any, ...], kwargs: dict[str, Any], position: int, name: str) -> Any:
    return args[position] if len(args) > position else kwargs.get(name)
