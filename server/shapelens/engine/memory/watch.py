"""Feeds the :class:`~shapelens.engine.memory.ledger.MemoryLedger` from a torch dispatch
mode: every op's new storages (by their size, as the device holds them), its FLOPs (torch's
``FlopCounterMode`` formulas), each at the user's line that ran it.

The mode only looks: it calls the op as it came and returns its result. It reads storages'
sizes and weak references (to see them freed), never data. What runs around an op gives new
storages their category: an optimizer's step (its global step hooks), a backward pass
(``torch.autograd.backward``/``grad``, wrapped while the watch runs), ``nn.Parameter``
(which takes over a storage already counted). Everything replaced is put back by
:meth:`MemoryWatch.stop`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import sys
import weakref
from collections.abc import Callable
from types import FrameType
from typing import Any

from shapelens.engine.findings import call_trials, nonfinite_scan
from shapelens.engine.memory.ledger import MemoryLedger, Running, Where
from shapelens.engine.recording import values
from shapelens.engine.recording.scope import UserCodeScope
from shapelens.engine.torch_support import torch_compat


class MemoryWatch:
    def __init__(self, ledger: MemoryLedger, scope: UserCodeScope) -> None:
        self.ledger = ledger
        self.scope = scope
        self._refs: dict[int, weakref.ref[Any]] = {}
        self._undo: list[Callable[[], None]] = []
        self._in_step = 0
        self._in_backward = 0
        self._last: tuple[int, int] | None = None
        self._user_code: dict[Any, bool | str] = {}
        self._parameters: weakref.WeakSet[Any] = weakref.WeakSet()
        self._calls: list[int] = []
        """ids of the modules whose forward is running, outermost first."""
        self._backward: list[int] = []
        """ids of the modules whose backward is running, outermost first."""
        self._workspaces: dict[tuple[Any, ...], int] = {}

    # -- installing ----------------------------------------------------------------------
    def start(self, torch: Any) -> None:
        """Watch from here on: a shape-only run starts it after its fake mode, so ops reach
        it with fake tensors; a real run (``--memory``) once torch is imported, with real
        ones (sizes and storages are read the same way: nothing here assumes ``meta``)."""
        self._torch = torch
        self._flops = torch_compat.flop_formulas()
        self._rnn_layer = torch_compat.onednn_rnn_layer(torch)
        self._hook_optimizer_steps(torch)
        self._wrap_backward(torch)
        self._watch_parameters(torch)
        self._follow_module_calls(torch)
        mode = _mode_class()(self)
        mode.__enter__()
        self._undo.append(lambda: mode.__exit__(None, None, None))

    def stop(self) -> None:
        while self._undo:
            with contextlib.suppress(Exception):
                self._undo.pop()()

    def _hook_optimizer_steps(self, torch: Any) -> None:
        optimizer = importlib.import_module("torch.optim.optimizer")  # torch.optim hides it
        began: list[int] = []

        def before(*_: Any) -> None:
            self._in_step += 1
            began.append(self.ledger.ops)

        def after(step_of: Any, *_: Any) -> None:
            self._in_step -= 1
            with contextlib.suppress(Exception):
                state = []
                for parameter, per_parameter in step_of.state.items():
                    tensors = [t for t in per_parameter.values() if isinstance(t, torch.Tensor)]
                    state += [self._key(tensor) for tensor in tensors]
                    self.ledger.optimizer_state_of[id(parameter)] = sum(
                        t.untyped_storage().nbytes() for t in tensors
                    )
                self.ledger.settle(state, "optimizer state", began.pop() if began else 0)

        for handle in (
            optimizer.register_optimizer_step_pre_hook(before),
            optimizer.register_optimizer_step_post_hook(after),
        ):
            self._undo.append(handle.remove)

    def _wrap_backward(self, torch: Any) -> None:
        autograd = torch.autograd
        for name in ("backward", "grad"):
            original = getattr(autograd, name)

            def in_backward(*args: Any, _original: Any = original, **kwargs: Any) -> Any:
                self._in_backward += 1
                began = self.ledger.ops
                try:
                    return _original(*args, **kwargs)
                finally:
                    self._in_backward -= 1
                    if not self._in_backward:
                        self._backward.clear()  # a first layer's inputs need no gradient
                    with contextlib.suppress(Exception):
                        self._settle_gradients(began)
                        self.ledger.backward_done()

            setattr(autograd, name, in_backward)
            self._undo.append(_restorer(autograd, name, original))

    def _follow_module_calls(self, torch: Any) -> None:
        """torch's global forward hooks (public, every 2.x): which modules' forwards run.
        They take module calls off torch's fast path, which costs little next to fake
        kernels, and a real run asks for it (``--memory``). A module's backward runs from
        the gradients of its outputs being ready to those of its inputs (as torch's
        ``ModuleTracker`` sees it)."""
        module = importlib.import_module("torch.nn.modules.module")
        grad_hook = importlib.import_module("torch.autograd.graph").register_multi_grad_hook
        calls, backward = self._calls, self._backward

        def on_grads(tensors: list[Any], key: int, begins: bool) -> None:
            if not tensors or not torch.is_grad_enabled():
                return

            def fire(*_: Any) -> None:
                if begins:
                    backward.append(key)
                elif key in backward:
                    backward.remove(key)

            # It begins with the first of its outputs' gradients (a dict's other entries
            # may get theirs from later layers) and ends with the last of its inputs'.
            grad_hook(tensors, fire, mode="any" if begins else "all")

        def before(called: Any, args: Any) -> None:
            key = id(called)
            calls.append(key)
            self.ledger.module_called(key)
            if key not in self.ledger.module_names:
                self._name(called)
            with contextlib.suppress(Exception):
                needing = [t for t in _passed(torch.Tensor, args) if t.requires_grad]
                on_grads(needing, key, begins=False)

        def after(called: Any, args: Any, output: Any) -> None:
            key = id(called)
            if calls and calls[-1] == key:
                calls.pop()
            with contextlib.suppress(Exception):
                needing = [t for t in _passed(torch.Tensor, output) if t.requires_grad]
                on_grads(needing, key, begins=True)

        for handle in (
            module.register_module_forward_pre_hook(before),
            module.register_module_forward_hook(after, always_call=True),
        ):
            self._undo.append(handle.remove)

    def _name(self, root: Any) -> None:
        """Names for a module first called and its descendants: their dot paths from it, as
        the module tree has them (``transformer.h.11``; ``""`` for the root)."""
        names = self.ledger.module_names
        for path, module in root.named_modules():
            names.setdefault(id(module), (path, type(module).__name__))

    def _running(self) -> Running | None:
        """The innermost module whose backward (in a backward pass) or forward runs."""
        if self._in_backward:
            return (self._backward[-1], "backward") if self._backward else None
        return (self._calls[-1], "forward") if self._calls else None

    def _settle_gradients(self, began: int) -> None:
        grads = []
        for parameter in list(self._parameters):
            grad = parameter.grad
            if grad is not None:
                key = self._key(grad)
                grads.append(key)
                storage = torch_compat.local_shard(grad).untyped_storage()
                self.ledger.gradient_of[id(parameter)] = (key, storage.nbytes())
        self.ledger.settle(grads, "gradients", began)

    @staticmethod
    def _key(tensor: Any) -> int:
        return torch_compat.storage_key(torch_compat.local_shard(tensor).untyped_storage())

    def _watch_parameters(self, torch: Any) -> None:
        parameter = torch.nn.Parameter
        had = "__new__" in vars(parameter)
        original = parameter.__new__

        def new(cls: Any, *args: Any, **kwargs: Any) -> Any:
            made = original(cls, *args, **kwargs)
            with contextlib.suppress(Exception):  # an uninitialised parameter has no storage
                self.ledger.recategorise(self._key(made), "parameters")
                self._parameters.add(made)
            return made

        parameter.__new__ = new

        def undo() -> None:
            if had:
                parameter.__new__ = original
            else:
                del parameter.__new__

        self._undo.append(undo)

    # -- each op -------------------------------------------------------------------------
    def account(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> None:
        frame = self._user_frame(sys._getframe(2))
        if frame is None:
            return  # torch's own work before the program's first line (imports)
        filename = frame.f_code.co_filename
        where: Where = (self.scope.user_file(filename) or filename, frame.f_lineno)
        hit = (id(frame), frame.f_lineno)
        if hit != self._last:
            self._last = hit
            self.ledger.new_hit(where)
        torch = self._torch
        devices: set[str] = set()
        outputs = _tensors(torch.Tensor, out)
        born = 0
        if outputs:
            category = self._category(torch, args, kwargs)
            sizes = self._workspace(func, args, kwargs, outputs)
            for tensor in outputs:
                device, new = self._count(tensor, where, category, sizes.get(id(tensor)))
                devices.add(device)
                born += new if category == "activations" else 0
        formula = self._flops.get(torch_compat.op_packet(func))
        flops = 0
        if formula is not None and devices:
            flops = int(formula(*args, **kwargs, out_val=out))
            self.ledger.counted_flops(where, min(devices, key=_gpu_first), flops)
        if self._in_backward:
            if self._backward and flops:
                modules = self.ledger.modules
                for key in dict.fromkeys(self._backward):  # its children's included
                    modules[key].backward_flops += flops
        elif self._calls and (born or flops):
            modules = self.ledger.modules
            for key in self._calls:  # a module's figures hold its children's
                cost = modules[key]
                cost.activation_bytes += born
                cost.flops += flops
        if devices:
            self.ledger.op_done(where, devices, self._running())

    def _category(self, torch: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
        """What new storages of this op are: below autograd an output does not require
        grad yet, so a forward op's inputs tell (one that requires grad: it may be saved for
        the backward)."""
        if self._in_step or self._in_backward:
            return "other"  # settled when the pass ends: what it kept
        if torch.is_grad_enabled() and any(
            t.requires_grad for t in _tensors(torch.Tensor, (args, tuple(kwargs.values())))
        ):
            return "activations"
        return "other"

    def _workspace(
        self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], outputs: list[Any]
    ) -> dict[int, int]:
        """id of an output → the bytes its kernel really allocates, where the fake kernel's
        differ: oneDNN's LSTM layer on the CPU keeps a workspace for the backward (25 MiB for
        100 steps of 16 × 256) that its fake kernel returns empty. Its size is oneDNN's
        own: the real kernel runs once per shape on zeros (up to :data:`_PROBE_BYTES`)."""
        if (
            func is not self._rnn_layer
            or len(outputs) != 4
            or outputs[3].untyped_storage().nbytes()
        ):
            return {}
        torch = self._torch
        tensors = _tensors(torch.Tensor, args)
        if not args[-1] or any(t.device.type != "cpu" for t in tensors):
            return {}  # inference (no workspace), or not the CPU's kernel
        key = tuple(
            (tuple(a.shape), a.dtype) if isinstance(a, torch.Tensor) else repr(a) for a in args
        )
        nbytes = self._workspaces.get(key)
        if nbytes is None:
            nbytes = 0
            if sum(t.numel() * t.element_size() for t in tensors) <= _PROBE_BYTES:
                with torch_compat.unset_fake_temporarily():
                    real = [
                        torch.zeros(a.shape, dtype=a.dtype) if isinstance(a, torch.Tensor) else a
                        for a in args
                    ]
                    nbytes = int(func(*real, **kwargs)[3].untyped_storage().nbytes())
            self._workspaces[key] = nbytes
        return {id(outputs[3]): nbytes} if nbytes else {}

    def _count(
        self, tensor: Any, where: Where, category: str, nbytes: int | None = None
    ) -> tuple[str, int]:
        """(its device, the bytes of its storage when new here, else 0); ``nbytes``: what
        the device really allocates for it, where the fake kernel says otherwise."""
        device = values.device_name(tensor.device) or "cpu"
        # a DTensor's bytes are its own shard's (its ops run again on the shard, seen here too)
        storage = torch_compat.local_shard(tensor).untyped_storage()
        key = torch_compat.storage_key(storage)
        if self.ledger.tracks(key):
            return device, 0
        if nbytes is None:
            nbytes = int(storage.nbytes())
        self.ledger.allocated(key, nbytes, device, category, where)
        self._refs[key] = weakref.ref(storage, self._on_free(key))
        return device, nbytes

    def _on_free(self, key: int) -> Callable[[Any], None]:
        def freed(_: Any) -> None:
            self._refs.pop(key, None)
            self.ledger.freed(key)

        return freed

    def _user_frame(self, frame: FrameType | None) -> FrameType | None:
        """The innermost frame of the user's code above the op; None for an op of ShapeLens's
        own findings (a NaN scan, a failed call tried again): not the program's memory."""
        known = self._user_code
        while frame is not None:
            code = frame.f_code
            mine = known.get(code)
            if mine is None:
                filename = code.co_filename
                mine = known[code] = (
                    _OWN if filename in _OWN_WORK else self.scope.user_file(filename) is not None
                )
            if mine is _OWN:
                return None
            if mine:
                return frame
            frame = frame.f_back
        return None


def _tensors(tensor_type: type, value: Any) -> list[Any]:
    """The tensors in an op's arguments or result: itself, or inside tuples and lists (what
    aten ops take and return; a pytree walk would cost more than the op's accounting)."""
    if isinstance(value, tensor_type):
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for part in value for t in _tensors(tensor_type, part)]
    return []


def _passed(tensor_type: type, value: Any, depth: int = 0) -> list[Any]:
    """The tensors a module was given or returned, wherever they sit: torch's pytree walks
    tuples, lists, dicts, named tuples and ``ModelOutput``s (transformers registers it);
    a dataclass (a model's own output record) is opened by its fields."""
    found: list[Any] = []
    for leaf in torch_compat.tree_leaves(value):
        if isinstance(leaf, tensor_type):
            found.append(leaf)
        elif depth < 3 and dataclasses.is_dataclass(leaf) and not isinstance(leaf, type):
            fields = [getattr(leaf, field.name, None) for field in dataclasses.fields(leaf)]
            found += _passed(tensor_type, fields, depth + 1)
    return found


def _restorer(owner: Any, name: str, original: Any) -> Callable[[], None]:
    return lambda: setattr(owner, name, original)


def _gpu_first(device: str) -> tuple[bool, str]:
    return (device.startswith("cpu"), device)


_OWN = "own"
_OWN_WORK = frozenset(module.__file__ for module in (call_trials, nonfinite_scan))
"""ShapeLens's modules that run ops of their own on the program's tensors."""

_PROBE_BYTES = 2**28
"""The most bytes of arguments a kernel is run with, for real, to learn its workspace."""

_MODE: type | None = None


def _mode_class() -> type:
    """The dispatch mode, made once torch is loaded (its base class is torch's)."""
    global _MODE
    if _MODE is None:
        base = torch_compat.dispatch_mode_class()

        class _Watching(base):  # type: ignore[misc, valid-type]
            shapelens_accounts_only = True  # torch_compat.ACCOUNTS_ONLY

            def __init__(self, watch: MemoryWatch) -> None:
                super().__init__()
                self.watch = watch

            def __torch_dispatch__(
                self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None
            ) -> Any:
                kwargs = kwargs or {}
                out = func(*args, **kwargs)
                with contextlib.suppress(Exception):  # the accounts never break the program
                    self.watch.account(func, args, kwargs, out)
                return out

        _MODE = _Watching
    return _MODE
