"""Shape-only runs (``--fake``): the whole program on torch's fake tensors.

A fake tensor has a shape, dtype, device and autograd history but no data, so a 1B-parameter
model runs in seconds and a few hundred MB, and shape, dtype and device errors are raised
as on the real device. Where the program reads a value (``.item()``, ``if`` on a tensor,
printing one) it gets a stand-in, counted at its line (:mod:`.value_reads`); where a size
depends on the data (a boolean mask, ``nonzero``) the run goes on at its bound
(:mod:`.data_dependent`). What cannot run at all (an op with no fake kernel; every value read
with ``stop_at_values``) ends the run with its own status.

CUDA without a GPU: a CPU-only torch cannot hold a tensor whose device is ``cuda`` once
autograd sees it (it asks for a CUDA stream and aborts the process). Where torch has no
CUDA, ShapeLens reports CUDA as available and places every ``cuda`` tensor on torch's
``meta`` device instead (a :class:`~torch.overrides.TorchFunctionMode` rewrites the device
arguments of every torch call), and shows ``meta`` as ``cuda:0``: in hints, findings and
error messages. The program's own ``meta`` tensors read ``cuda:0`` too in such a run.
A device error is raised where a real GPU raises one, and only there (the fake kernels' checks,
and those they skip: :mod:`.device_rules`), as the GPU's RuntimeError, from the user's call.

Everything replaced here is put back by :meth:`ShapeOnly.remove`.
"""

from __future__ import annotations

import contextlib
import gc
import os
import re
import sys
import warnings
from collections.abc import Callable
from types import ModuleType
from typing import Any, cast

from shapelens.engine import SHAPELENS_DIR
from shapelens.engine.recording import values
from shapelens.engine.torch_support import data_dependent, simulated_values, torch_compat
from shapelens.engine.torch_support.after_import import when_imported
from shapelens.engine.torch_support.device_rules import SAME_DEVICE, DeviceRules
from shapelens.engine.torch_support.module_conversion import apply_by_replacing
from shapelens.engine.torch_support.shape_only_ranks import CannotSimulate, ShapeOnlyRanks
from shapelens.engine.torch_support.torch_errors import (
    FAKE_DEVICE_ERROR,
    FAKE_MATMUL_ERROR,
    op_without_fake_kernel,
)
from shapelens.engine.torch_support.value_reads import NOT_SIMULATED, ValueReads, Where
from shapelens.engine.torch_support.watched_warnings import shown_at_the_caller
from shapelens.lazy_regex import LazyPattern

STATUS = "shape_only_stop"
"""The run status when the program needed a value a shape-only run does not have."""
ENV_FLAG = "SHAPELENS_SHAPE_ONLY"
"""Set to "1" in a shape-only run: a program can skip what needs values."""
SIMULATED_CUDA = "cuda:0"
_OUR_ROOT = SHAPELENS_DIR + os.sep

_VALUE_READS = tuple(
    (LazyPattern(pattern), said)
    for pattern, said in (
        (r"\.item\(\)", "`.item()` reads a tensor's value"),
        (r"\.tolist\(\)", "`.tolist()` reads a tensor's values"),
        (r"\.numpy\(\)", "`.numpy()` reads a tensor's values"),
        (r"\bbool\(", "`bool()` of a tensor reads its value"),
        (r"\bfloat\(", "`float()` of a tensor reads its value"),
        (r"\bint\(", "`int()` of a tensor reads its value"),
        (r"\bprint\(|:[^}]*\}", "formatting a tensor reads its value"),
        (r"^(el)?if\b", "an `if` on a tensor reads its value"),
        (r"^while\b", "a `while` on a tensor reads its value"),
        (r"^assert\b", "an `assert` on a tensor reads its value"),
    )
)
"""What on a line read a value (the first that matches names it): the read itself before
the ``print(`` or ``if`` around it."""


class ShapeOnlyStop(Exception):
    """The program asked for something only real data has (printing a tensor's values)."""


class SimulatedValueFailed(ShapeOnlyStop):
    """A call that got a stand-in value failed: with the real value it might not have."""


class ShapeOnly:
    """Puts a run on fake tensors once torch is imported; :meth:`remove` undoes it.

    ``where`` finds the line of user code running now, ``line_text`` reads a line; with
    ``stop_at_values`` the first value read ends the run instead of getting a stand-in."""

    def __init__(
        self, where: Where, line_text: Callable[[str, int], str], *, stop_at_values: bool = False
    ) -> None:
        self.simulated_cuda = False
        self.reads: ValueReads | None = None if stop_at_values else ValueReads(where, line_text)
        self.ranks: ShapeOnlyRanks | None = None
        """A rank of a distributed program: its collectives and device mesh (set before
        torch is imported)."""
        self._undo: list[Callable[[], None]] = []

    def install(self, on_ready: Callable[[bool], None]) -> None:
        """Fake tensors from the moment torch is imported; ``on_ready(simulated_cuda)``."""
        os.environ[ENV_FLAG] = "1"
        self._undo.append(lambda: _forget(ENV_FLAG))

        def on_torch(torch: ModuleType) -> None:
            self._on_torch(torch)
            on_ready(self.simulated_cuda)

        when_imported("torch", on_torch)

    def _on_torch(self, torch: Any) -> None:
        FakeTensor, FakeTensorMode = torch_compat.fake_tensor_types()
        self.simulated_cuda = not torch.cuda.is_available()
        values.kind_of_type[FakeTensor] = values.TORCH  # the program's values, here
        if self.reads is None:
            self._patch(FakeTensor, "__repr__", _refuse_to_print)
        else:
            self.reads.install(torch, FakeTensor, self._patch)
            self._undo.append(self.reads.remove)
            self._undo.append(simulated_values.bounded.clear)
        self._patch(torch, "save", _skip_save)
        if self.ranks is not None:
            self.ranks.install(torch, self._patch, self.reads)
        self._patch(torch.nn.Module, torch_compat.MODULE_APPLY, apply_by_replacing)
        self._patch_data_loading(torch)
        if self.simulated_cuda:
            self._simulate_cuda(torch)
        self._quiet_about_fake_tensors()
        if torch_compat.gc_clears_live_fake_tensors(torch) and gc.isenabled():
            gc.disable()  # fake tensors hold no data: a short run's cycles cost little
            self._undo.append(gc.enable)
        mode = FakeTensorMode(allow_non_fake_inputs=True)
        mode.__enter__()
        self._undo.append(lambda: mode.__exit__(None, None, None))
        calls = _as_on_the_device(torch, simulate_cuda=self.simulated_cuda, reads=self.reads)
        calls.__enter__()
        self._undo.append(lambda: calls.__exit__(None, None, None))

    def _quiet_about_fake_tensors(self) -> None:
        """torch's warnings about fake tensors themselves (a module's fast-path check reads a
        data pointer), and Python's about the stand-ins, are ShapeLens's doing, never the
        program's: a real run has none."""
        filters = cast("list[Any]", warnings.filters)  # typeshed says a Sequence
        messages = (*torch_compat.FAKE_TENSOR_WARNINGS, *simulated_values.CONVERSION_WARNINGS)
        for message in messages:
            warnings.filterwarnings("ignore", message=message)
        ours = filters[: len(messages)]  # each went in first

        def restore() -> None:  # ours only: the program's own filters stay as it left them
            for entry in ours:
                with contextlib.suppress(ValueError):
                    filters.remove(entry)

        self._undo.append(restore)

    def _simulate_cuda(self, torch: Any) -> None:
        values.DEVICE_ALIASES["meta"] = SIMULATED_CUDA
        self._undo.append(values.DEVICE_ALIASES.clear)
        replacements: dict[str, Callable[..., Any]] = {
            "is_available": lambda: True,
            "device_count": lambda: 1,
            "current_device": lambda: 0,
            "get_device_name": lambda device=None: "ShapeLens simulated CUDA device",
            "get_device_capability": lambda device=None: (8, 0),
            "is_bf16_supported": lambda *args, **kwargs: True,
            "synchronize": lambda device=None: None,
            "set_device": lambda device: None,
            "empty_cache": lambda: None,
            "manual_seed": lambda seed: None,
            "manual_seed_all": lambda seed: None,
            "memory_allocated": lambda device=None: 0,
            "max_memory_allocated": lambda device=None: 0,
            "reset_peak_memory_stats": lambda device=None: None,
            # An optimizer's step asks it on torch < 2.6 (a CUDA build without a driver
            # fails there); newer ones ask torch.accelerator, below.
            "is_current_stream_capturing": lambda: False,
        }
        for name, replacement in replacements.items():
            self._patch(torch.cuda, name, replacement)
        # No accelerator for torch's stream and graph-capture checks (an optimizer's step
        # asks for the current CUDA stream): a CUDA build without a driver would fail there.
        accelerator = getattr(torch, "accelerator", None)
        if accelerator is not None:
            self._patch(accelerator, "current_accelerator", lambda check_available=False: None)
            self._patch(accelerator, "is_available", lambda: False)
        load = torch.load

        def load_cuda_on_meta(f: Any, map_location: Any = None, *args: Any, **kwargs: Any) -> Any:
            """A checkpoint's CUDA tensors (saved on a GPU, or mapped there) on ``meta``."""
            if _is_cuda(torch, map_location):
                map_location = "meta"
            elif map_location is None:  # GPU storages where they were saved: simulated
                map_location = {f"cuda:{index}": "meta" for index in range(16)} | {"cuda": "meta"}
            return load(f, map_location, *args, **kwargs)

        self._patch(torch, "load", load_cuda_on_meta)

    def _patch_data_loading(self, torch: Any) -> None:
        """Batches are made in this process (workers would have to pickle fake tensors), and
        the sampler's indices and seeds are real numbers (they need values)."""

        def real_numbers(method: Callable[..., Any]) -> Callable[..., Any]:
            def with_real_numbers(*args: Any, **kwargs: Any) -> Any:
                with torch_compat.unset_fake_temporarily():
                    return method(*args, **kwargs)

            return with_real_numbers

        for owner, name, replacement in torch_compat.data_loader_patches(real_numbers):
            self._patch(owner, name, replacement)

    def _patch(self, owner: Any, name: str, replacement: Any) -> None:
        had = name in vars(owner)
        original = vars(owner).get(name)
        setattr(owner, name, replacement)

        def undo() -> None:
            if had:
                setattr(owner, name, original)
            else:
                with contextlib.suppress(AttributeError):
                    delattr(owner, name)

        self._undo.append(undo)

    def remove(self) -> None:
        """Put back everything replaced (last first); the fake mode is left."""
        while self._undo:
            with contextlib.suppress(Exception):
                self._undo.pop()()


def _on_cpu(torch: Any, device: Any) -> bool:
    return device is None or str(device) == "cpu" or getattr(device, "type", None) == "cpu"


def _forget(variable: str) -> None:
    os.environ.pop(variable, None)


def stop_reason(exc: BaseException, line_text: str | None) -> str | None:
    """Why a shape-only run stopped at ``exc``, when it is a value it could not know (else
    None: a real error of the program, reported as such)."""
    kind = type(exc).__name__
    if isinstance(exc, (SimulatedValueFailed, CannotSimulate)):
        return str(exc)
    if isinstance(exc, ShapeOnlyStop):
        what = "printing a tensor shows its values"
    elif kind == "DataDependentOutputException":
        what = _value_read_in(line_text) or "this reads a tensor's value"
    elif kind == "DynamicOutputShapeException":
        what = (
            "the result's shape depends on the tensor's values (nonzero, a boolean mask, "
            "unique, masked_select)"
        )
    elif (op := op_without_fake_kernel(exc)) is not None:
        return (
            f"`{op}` cannot be simulated: it has no fake kernel (it needs real data). To "
            f'trace past it, skip it in shape-only runs: `if os.environ.get("{ENV_FLAG}") '
            '!= "1": ...`'
        )
    else:
        return None
    return (
        f"{what}; a shape-only run has shapes, not values. To trace past it, skip it in "
        f'shape-only runs: `if os.environ.get("{ENV_FLAG}") != "1": ...`'
    )


def _value_read_in(line_text: str | None) -> str | None:
    """The first of :data:`_VALUE_READS` on the line (``.item()`` before the ``print(``
    around it)."""
    code = (line_text or "").strip()
    return next((said for pattern, said in _VALUE_READS if pattern.search(code)), None)


def _is_cuda(torch: Any, device: Any) -> bool:
    if isinstance(device, str):
        return bool(_CUDA.match(device))
    return isinstance(device, torch.device) and device.type == "cuda"


def _refuse_to_print(self: Any, *args: Any, **kwargs: Any) -> str:
    raise ShapeOnlyStop("printing a tensor's values in a shape-only run")


def _skip_save(obj: Any, f: Any, *args: Any, **kwargs: Any) -> None:
    """A checkpoint of fake tensors has no data: the user's file is left as it was."""
    print(
        f"shapelens: torch.save({_target_name(f)}) skipped in a shape-only run",
        file=sys.stderr,
    )


def _target_name(f: Any) -> str:
    return repr(os.fspath(f)) if isinstance(f, (str, os.PathLike)) else type(f).__name__


_CUDA = re.compile(r"^cuda(:\d+)?$")


def as_the_device_says(text: str, *, simulate_cuda: bool) -> str:
    """An error message of a fake kernel as the real device words it: a matrix product's
    shapes as cuBLAS/CPU report them, ``meta`` as ``cuda:0`` when CUDA is simulated."""
    text = FAKE_MATMUL_ERROR.sub(
        lambda m: "mat1 and mat2 shapes cannot be multiplied ({}x{} and {}x{})".format(*m.groups()),
        text,
    )
    text = FAKE_DEVICE_ERROR.sub(lambda m: "{}, {} and {}!".format(SAME_DEVICE, *m.groups()), text)
    if not simulate_cuda:
        return text
    return text.replace("device type 'meta'", "device type 'cuda'").replace("meta", SIMULATED_CUDA)


def _as_on_the_device(torch: Any, *, simulate_cuda: bool, reads: ValueReads | None) -> Any:
    """A torch function mode that words errors as the real device does and, when CUDA is
    simulated, puts what the program asks on ``cuda`` on ``meta``.

    Random integers drawn on the CPU (``torch.randint``, ``torch.randperm``: a batch's
    positions, ``random_split``'s order) are real, and so is what is computed from real
    tensors alone: they do not depend on the data, and nanoGPT's ``for i in ix:
    data[i : i + block_size]`` needs them as numbers. Everything else is fake."""
    FakeTensor, _ = torch_compat.fake_tensor_types()
    unset_fake_temporarily = torch_compat.unset_fake_temporarily
    tree_leaves = torch_compat.tree_leaves
    meta = torch.device("meta")
    tensor_to = torch.Tensor.to
    tensor_cuda = torch.Tensor.cuda
    random_integers = (torch.randint, torch.randperm)
    indexing = (torch.Tensor.__getitem__, torch.Tensor.__setitem__)

    def as_number(index: Any) -> Any:
        return _as_number(torch, FakeTensor, unset_fake_temporarily, index)

    def device_of(tensor: Any) -> str:
        device = tensor.device
        return SIMULATED_CUDA if simulate_cuda and device.type == "meta" else str(device)

    rules = DeviceRules(torch, device_of, tree_leaves)

    def on_meta(device: Any) -> Any:
        return meta if _is_cuda(torch, device) else device

    class AsOnTheDevice(torch.overrides.TorchFunctionMode):  # type: ignore[misc]
        def __torch_function__(
            self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None
        ) -> Any:
            kwargs = dict(kwargs or {})
            if simulate_cuda and _to_the_gpu(torch, tensor_to, tensor_cuda, func, args, kwargs):
                real = False  # a real tensor sent to the simulated GPU becomes a fake one
            elif any(func is f for f in random_integers):
                real = _on_cpu(torch, kwargs.get("device"))
            else:
                leaves = [x for x in tree_leaves((args, kwargs)) if isinstance(x, torch.Tensor)]
                real = bool(leaves) and not any(isinstance(x, FakeTensor) for x in leaves)
            if real:
                with unset_fake_temporarily():
                    return self._call(func, args, kwargs)
            if any(func is f for f in indexing) and len(args) > 1:
                args = (args[0], as_number(args[1]), *args[2:])
            if not simulate_cuda:
                return self._call(func, args, kwargs)
            if func is tensor_cuda:  # Module.cuda() comes here for each tensor
                return args[0].to(meta)
            if "device" in kwargs:
                kwargs["device"] = on_meta(kwargs["device"])
            if func is tensor_to and len(args) > 1:
                target = args[1]
                if isinstance(target, int) and not isinstance(target, bool):
                    target = meta  # .to(0): the first GPU
                args = (args[0], on_meta(target), *args[2:])
            return self._call(func, args, kwargs)

        _call = staticmethod(_device_call(torch, rules, simulate_cuda=simulate_cuda, reads=reads))

    return AsOnTheDevice()


def _device_call(
    torch: Any, rules: DeviceRules, *, simulate_cuda: bool, reads: ValueReads | None
) -> Callable[[Any, tuple[Any, ...], dict[str, Any]], Any]:
    """How the mode runs a fake call: the GPU's device checks first, the error worded as the
    device words it, an op whose size depends on the data at its bound (with ``reads``:
    stand-ins on; without, such an op stops the run)."""
    sizes = None if reads is None else data_dependent.AtTheBound(torch, torch_compat.tree_leaves)
    sized_by_data = torch_compat.data_dependent_size_error()
    value_needed = torch_compat.data_dependent_value_error()
    nan_tests = frozenset() if reads is None else reads.nan_tests
    bounded = simulated_values.bounded  # empty while no size is a bound

    def call(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        said = rules.error(func, args, kwargs)
        if said is not None:  # what the GPU checks and the fake kernel does not
            raise RuntimeError(said)
        try:
            with shown_at_the_caller(func, sys._getframe(2)):  # not at this module's line
                result = func(*args, **kwargs)
        except sized_by_data:
            result = None if sizes is None else sizes.run(func, args, kwargs)
            if result is None:
                raise
            return result
        except value_needed:
            result = NOT_SIMULATED if reads is None else reads.run_reading(func, args, kwargs)
            if result is NOT_SIMULATED:
                raise
            return result
        except RuntimeError as err:
            if reads is not None and _got_a_stand_in(args, kwargs):
                raise SimulatedValueFailed(_failed_on_a_stand_in(func, err)) from None
            if err.args and isinstance(err.args[0], str):
                said = as_the_device_says(err.args[0], simulate_cuda=simulate_cuda)
                err.args = (said, *err.args[1:])
            if _raised_by_torch_itself(torch, err):
                # As the device's kernel raises it: no fake-tensor frames, no chain.
                raise RuntimeError(*err.args) from None
            raise
        # Two lookups per op; the work only for a NaN test, or while a size is a bound.
        if func in nan_tests and reads is not None:
            reads.after_call(func, args, result)
        if bounded and sizes is not None:
            sizes.after_call(args, kwargs, result)
        return result

    return call


def _got_a_stand_in(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """A number among the call's arguments is a stand-in (``torch.zeros(n)`` with ``n`` from
    ``.item()``). Looked at only when the call failed."""
    stand_ins = tuple(simulated_values.TYPE_NAMES)
    return any(isinstance(leaf, stand_ins) for leaf in torch_compat.tree_leaves((args, kwargs)))


def _failed_on_a_stand_in(func: Any, err: BaseException) -> str:
    name = getattr(func, "__name__", "this call")
    said = (str(err).splitlines() or [""])[0]
    return (
        f"`{name}` failed on a simulated value ({said}): a shape-only run stands in for the "
        "values the program reads, and with the real value this call might not fail. To "
        f'trace past it, skip it in shape-only runs: `if os.environ.get("{ENV_FLAG}") != "1": '
        "...`"
    )


def _raised_by_torch_itself(torch: Any, err: RuntimeError) -> bool:
    """``err`` is torch's own error of the call (a kernel's, or the fake kernel's device
    check), not one of a subclass or of user code the call ran (an autograd Function's):
    only torch's frames (and ShapeLens's own dispatch mode) lie below the call."""
    if type(err) is not RuntimeError and not torch_compat.is_fake_device_error(err):
        return False
    roots = (os.path.dirname(torch.__file__) + os.sep, _OUR_ROOT)  # ours: the memory watch
    below = err.__traceback__.tb_next if err.__traceback__ is not None else None
    while below is not None:
        if not below.tb_frame.f_code.co_filename.startswith(roots):
            return False
        below = below.tb_next
    return True


def _as_number(torch: Any, fake: type, unset_fake: Any, index: Any) -> Any:
    """A real one-element integer tensor in an index is the number it holds (what Python's
    ``__index__`` would read); in a fake call torch could not read it."""
    if isinstance(index, tuple):
        return tuple(_as_number(torch, fake, unset_fake, part) for part in index)
    if isinstance(index, slice):
        return slice(
            _as_number(torch, fake, unset_fake, index.start),
            _as_number(torch, fake, unset_fake, index.stop),
            _as_number(torch, fake, unset_fake, index.step),
        )
    if (
        isinstance(index, torch.Tensor)
        and not isinstance(index, fake)
        and index.dim() == 0
        and not index.is_floating_point()
        and index.dtype != torch.bool
        and index.device.type == "cpu"
    ):
        with unset_fake():
            return int(index)
    return index


def _to_the_gpu(
    torch: Any,
    tensor_to: Any,
    tensor_cuda: Any,
    func: Any,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> bool:
    """The call sends a tensor to a GPU (``.cuda()``, ``.to("cuda")``, ``.to(0)``, ``device=``)."""
    if func is tensor_cuda or _is_cuda(torch, kwargs.get("device")):
        return True
    if func is tensor_to and len(args) > 1:
        target = args[1]
        return _is_cuda(torch, target) or (isinstance(target, int) and not isinstance(target, bool))
    return False
