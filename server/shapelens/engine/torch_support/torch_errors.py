"""torch's error messages as each release words them (2.4 to 2.14): what a finding reads
from an error only where it could not observe the call, and the wordings that tell one
failure from another (a shape-only run's fake kernels, a DataLoader worker's collate)."""

from __future__ import annotations

import re

from shapelens.lazy_regex import LazyPattern

DEVICE_ERROR = LazyPattern(
    r"same device|two devices|expected device|not on the expected device|backend (cpu|cuda)"
    r"|device type|on device \w+"
    # fake tensors, torch 2.4: "Unhandled FakeTensor Device Propagation for aten.mul.Tensor,
    # found two different devices cpu, meta" (2.5+: "Expected all tensors to be on the same device")
    r"|different devices",
    re.IGNORECASE,
)
DTYPE_ERROR = LazyPattern(
    r"dtype|scalar type|must be bool|boolean mask|same type|bool and floating types"
    r"|expected .* but got .*(float|double|long|int|half)",
    re.IGNORECASE,
)
SHAPE_ERROR = LazyPattern(
    r"shapes cannot be multiplied|size mismatch|is invalid for input of size"
    r"|sizes of tensors must match|must match the size of tensor|to have \d+ channels"
    r"|expected input batch_size|multi-target not supported|expects each tensor to be equal size"
    r"|view size is not compatible|inconsistent tensor size|expected target size"
    r"|expected \d+D .*input|mat1 dim 1 must match|dimension out of range"
    r"|target size .* different to the input size|expected hidden(\[\d\])? size"
    r"|shape mismatch",
    re.IGNORECASE,
)
WANTS_BOOL_ERROR = LazyPattern(
    r"boolean mask|must be bool|bool(ean)? (tensor|dtype)|supports boolean"
)
"""A dtype error that asks for a bool tensor (a mask)."""
WANTS_INTEGER_ERROR = LazyPattern(r"\b(Long|Int)\b|int64|indices", re.IGNORECASE)
"""A dtype error that asks for integer indices."""
FAKE_DEVICE_ERROR = LazyPattern(
    r"Unhandled FakeTensor Device Propagation for \S+, found two different devices (\S+), (\S+)"
)
"""The fake kernels' device check as torch 2.4 words it; newer ones say what a GPU says,
"Expected all tensors to be on the same device, but found at least two devices, A and B!"."""
FAKE_MATMUL_ERROR = LazyPattern(
    r"a and b must have same reduction dim, but got \[(\d+), (\d+)\] X \[(\d+), (\d+)\]\.?"
)
"""A matrix product's shape error as a fake (meta) kernel words it, every 2.x; the real
device says "mat1 and mat2 shapes cannot be multiplied"."""
WORKER_BATCH_RESIZE_ERROR = LazyPattern(
    r"^RuntimeError: Trying to resize storage that is not resizable"
)
"""How ``default_collate`` fails in a DataLoader worker on a sample smaller than the batch's
first (every 2.x): there it stacks into shared memory sized by the samples' total, and the
resize fails first; in the main process ``torch.stack`` says "expects each tensor to be
equal size"."""
STACK_SIZES_ERROR = LazyPattern(r"^stack expects each tensor to be equal size")
SAVED_TENSOR_CHANGED_ERROR = LazyPattern(
    r"modified by an inplace operation: \[[\w.]+ \[(?P<shape>[\d, ]*)\]\]"
    r"(, which is output \d+ of (?P<node>\w+),)? is at version (?P<version>\d+)"
)
"""A backward that needs a tensor an in-place op changed after the op that made it (the
message's ``node``: ``Sigmoid`` in 2.13 and 2.14, ``SigmoidBackward0`` in 2.4) saved it; a
weight's view (``AsStrided``, ``T``) or a leaf (no node) changed by an optimizer's step."""
_NO_FAKE_KERNEL = LazyPattern(
    # the dispatcher, every 2.x ("... 'SparseMeta' backend. ... [CPU, CUDA, ...]" and a dump
    # of every kernel registered: thousands of lines)
    r"Could not run '(?P<dispatched>[\w:.]+)' with arguments from the '\w*Meta' backend"
    # a torch.library.custom_op without register_fake (2.4+)
    r"|no fake impl registered for <CustomOpDef\((?P<custom>[\w:.]+)\)>"
    # an operator defined with torch.library.Library, a C extension's (2.4+)
    r"|^(?P<library>[\w:.]+): attempted to run this operator with Meta tensors"
)


def op_without_fake_kernel(exc: BaseException) -> str | None:
    """The op that fake tensors could not run because it has no fake (meta) kernel: a
    sparse layout's op on torch 2.4, a custom op without ``register_fake``, a C
    extension's; else None. Its own error, or one it was raised in handling (torch 2.4
    then tries the op another way: "Cannot access storage of SparseCsrTensorImpl")."""
    seen: BaseException | None = exc
    for _ in range(4):
        if seen is None:
            break
        op = _op_without_fake_kernel(seen)
        if op is not None:
            return op
        seen = seen.__cause__ or seen.__context__
    return None


def _op_without_fake_kernel(exc: BaseException) -> str | None:
    if type(exc).__name__ == "UnsupportedOperatorException":  # fake_tensor's, 2.0 to 2.14
        op = exc.args[0] if exc.args else None
        name = getattr(op, "name", None)  # an OpOverload: "mylib::shift", "aten::add.Tensor"
        return str(name() if callable(name) else op or "an operator")
    if not isinstance(exc, (NotImplementedError, RuntimeError)):
        return None
    found = _NO_FAKE_KERNEL.search(str(exc))
    return next((name for name in found.groups() if name), None) if found else None
