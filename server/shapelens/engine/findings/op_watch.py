"""Torch calls of a statement, seen as they run: their real operands, result or error.

A broadcast hides in ``fc(x) - y.squeeze(1)`` as often as in ``y - pred``, and the
operands of the former are values no name holds; a failing ``F.cross_entropy(logits,
targets.view(-1, 1))`` is explained by what it was passed, not by what the line names. On
a statement's checked hits (1 to 4, 8, 16, …) the tracer watches it: a ``TorchFunctionMode`` is
pushed while the statement runs. It hands each elementwise op called directly from the
statement's frame, with its operands and result, to the broadcast rule, and keeps the
torch call that raised (the outermost one: torch's own calls inside it run with the mode
off) for the failed-call rule. Between checked hits nothing is pushed, so the cost stays
bounded by lines × log(iterations). A statement whose hit makes more than
:data:`QUIET_AFTER` calls that are neither its own nor a module's it called (an optimizer's
``step()``: hundreds of in-place updates in torch.optim; ``trainer.fit()``: a library's
whole loop) goes quiet: it is not watched again (a call that fails there is still
explained, as on an unwatched hit). A statement that does a training step's housekeeping
goes quiet at its first call from there: torch.optim's code (``optimizer.step()``, a
scheduler's ``step()``) or a ``zero_grad()`` (an optimizer's or a module's). Those update
parameters, their gradients and their optimizer states, never the user's data; the 31
calls of an SGD step over three layers were half of every checked step's watched calls,
and a GPT's ``model.zero_grad()`` sets each of its 43 parameters' ``.grad`` through the
mode.

A quiet statement's mode passes calls on until popped: before the next module call or
optimizer step (one-shot global hooks: inside its handler torch pushes it back), or when
the statement ends. A library's loop run by one statement (``trainer.train()``) would
otherwise send its every torch call through the mode: 2.2× a 4,000-step MLP's time.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable
from types import CodeType, FrameType, TracebackType
from typing import Any, NamedTuple

from shapelens.engine.findings.call_trials import Verdict, judge
from shapelens.engine.findings.forward_frames import (
    ModuleCall,
    forward_call,
    is_call_helper,
    is_torch_module,
    module_of,
)
from shapelens.engine.findings.mode_frames import skip_the_mode
from shapelens.engine.findings.op_names import op_label
from shapelens.engine.recording.scope import INLINE_CODE_NAMES
from shapelens.engine.source.elementwise import OPERATOR_NAMES
from shapelens.engine.switches import tuned
from shapelens.engine.torch_support import torch_compat
from shapelens.engine.torch_support.watched_warnings import shown_at_the_caller

# torch function name → (operator as written, operands reversed)
_OPS: dict[str, tuple[str, bool]] = {}
for _symbol, _names in OPERATOR_NAMES.items():
    for _name in _names:
        _OPS[_name] = (_symbol, False)
        _OPS[f"__{_name}__"] = (_symbol, False)
        _OPS[f"__r{_name}__"] = (_symbol, True)
_OPS["__truediv__"] = ("/", False)
_OPS["__rtruediv__"] = ("/", True)

OnOp = Callable[[FrameType, str, Any, Any, Any], None]
"""(frame, operator, left value, right value, result)"""


class Called(NamedTuple):
    """A torch call a watched statement made (directly, or inside a module it called)."""

    frame: FrameType
    """The watched frame of user code."""
    op: str
    """``torch.cat``, ``Tensor.squeeze``; a module's class (``Linear``) for its calls."""
    func: Any
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    inputs: list[Any]
    """The tensors among the arguments."""
    results: list[Any]
    """The tensors it returned."""
    direct: bool
    """Called by the statement itself (through torch's Python wrappers), not in a module."""
    wrapper: Any = None
    """The torch.nn module the statement called whose own ``forward`` made this call (an
    ``nn.Softmax`` kept as an attribute, a loss module): judged as the call it wraps."""


OnCall = Callable[[Called], None]


Walked = tuple[FrameType | None, bool, Any, Any]
"""What :meth:`OpWatch._walk` found: (watched frame, direct, module, wrapper)."""
_NOWHERE: Walked = (None, False, None, None)
_FORGOTTEN: tuple[FrameType | None, Walked] = (None, _NOWHERE)
_HOUSEKEEPING: Walked = (None, True, None, None)
"""What :meth:`OpWatch._walk` finds for a call of a training step's housekeeping."""
_ZERO_GRAD = "zero_grad"
IsUserCode = Callable[[CodeType], object]
"""Truthy for code the tracer follows (the user's)."""
_MAX_JUDGED = 64
"""Failed calls judged in a run (each is called again a few times on meta tensors)."""
_MAX_DEPTH = 40
"""Frames walked from a failing call up to the user's (torch, and libraries between)."""
QUIET_AFTER = tuned(128)
"""Calls of one watched hit that no rule looks at, after which its statement goes quiet."""
_OURS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
"""The engine's own code: its metadata reads (the module tree's) pass the mode untouched."""


class FailedCall:
    """A torch call that raised, called (maybe through libraries) by the user's ``frame``.
    ``modules``: the ``nn.Module`` calls it was made in, innermost first (the ``Linear``
    inside the ``Sequential`` the user called), each with the arguments its forward got;
    empty for a call the user made directly. ``inline``: the frames of ``frame``'s file the
    call was made in below it (a list comprehension on 3.11, a generator expression),
    innermost first: where the names the statement passes live (``[branch(x) for branch in
    self.branches]``)."""

    __slots__ = ("args", "exc", "frame", "func", "inline", "kwargs", "modules", "verdict")

    def __init__(
        self,
        *,
        func: Any,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        exc: BaseException,
        frame: FrameType,
        modules: tuple[ModuleCall, ...] = (),
        verdict: Verdict,
        inline: tuple[FrameType, ...] = (),
    ) -> None:
        self.func = func
        self.args = args
        self.kwargs = kwargs
        self.exc = exc
        self.frame = frame
        self.modules = modules
        self.verdict = verdict
        self.inline = inline


class OpWatch:
    """Watches frames of user code while their current statement runs."""

    def __init__(self, on_op: OnOp, is_user_code: IsUserCode) -> None:
        self.on_op = on_op
        self.on_call: OnCall | None = None
        self.is_user_code = is_user_code
        self.enabled = True
        """Off when the program's torch.compile regions really compile (``--compile``):
        dynamo would trace a mode active around a compiled call and break its graph."""
        self.base_depth = 0
        """Modes of ours under it for the whole run (a shape-only run's): not the user's."""
        self._frames: dict[int, FrameType] = {}
        self._active = False
        """Our mode is pushed: the innermost frame of user code has its statement watched."""
        self._last_walk: tuple[FrameType | None, Walked] = _FORGOTTEN
        """Where calls from the last calling frame lead (see :meth:`_walk`): a frame's ops
        come in a row. Only that one frame is held: a library frame that returned keeps its
        locals (``F.batch_norm``'s result) alive for as long as it is held."""
        self._labels: dict[int, str] = {}
        self._mode: Any = None
        self._tensor: type = type(None)  # torch.Tensor, once the mode is made
        self._torch_dir = ""
        self._optim_dir = ""
        self._failed: FailedCall | None = None
        self._judged = 0
        self.passing = False
        """The mode hands calls straight on: the statement it watches went quiet."""
        self._current: FrameType | None = None
        """The frame whose statement the active mode watches (the innermost watched)."""
        self._unused: dict[int, int] = {}
        """Watched frames' calls of their hit so far that no rule looks at."""
        self._statements: dict[int, tuple[CodeType, int]] = {}
        """Watched frames' statements: (code, the line the hit started on)."""
        self._quiet: set[tuple[CodeType, int]] = set()
        """Statements gone quiet: never watched again."""
        self._unhook: Callable[[], None] | None = None  # the hooks that pop a quiet mode

    def begin(self, frame: FrameType) -> bool:
        """Watch ``frame``'s statement until :meth:`end`; False when torch cannot be watched
        now (not imported, compiling, or another mode is active)."""
        torch = sys.modules.get("torch")
        if not self.enabled or torch is None or not hasattr(torch, "overrides"):
            return False
        compiler = getattr(torch, "compiler", None)
        if compiler is not None and compiler.is_compiling():
            return False
        statement = (frame.f_code, frame.f_lineno)
        if statement in self._quiet:
            return False
        if self._mode is None:
            self._mode = _make_mode(torch, self)
            self._tensor = torch.Tensor
            self._torch_dir = os.path.dirname(str(torch.__file__))
            self._optim_dir = os.path.join(self._torch_dir, "optim", "")
        if not self._active and not self._activate(torch):
            return False
        self._frames[id(frame)] = frame
        self._statements[id(frame)] = statement
        self._current, self._unused[id(frame)] = frame, 0
        return True

    def end(self, frame: FrameType) -> None:
        """``frame``'s statement is over (the frame runs: it is the innermost user frame)."""
        if self._frames.pop(id(frame), None) is None:
            return
        self._statements.pop(id(frame), None)
        self._unused.pop(id(frame), None)
        if not self._frames:
            self._failed = None  # nothing of the program stays alive through us
        if self._active and not self._deactivate():
            self._frames[id(frame)] = frame  # a user mode sits on ours: end when it is gone

    def pause(self) -> None:
        """A call of user code starts inside a watched statement: the callee's statements
        are watched on their own checked hits, not for the whole of the caller's (a
        ``main()`` watched on its first hit would watch the whole program)."""
        if self._active:
            self._deactivate()

    def resume(self, caller: FrameType | None) -> None:
        """A call of user code returned towards ``caller``: watch again if the innermost user
        frame there has its statement watched (a module's forward returned into the
        statement that called the model)."""
        frames = self._frames
        if self._active or not frames:
            return
        frame = caller
        for _ in range(_MAX_DEPTH):
            if frame is None:
                return
            if frames.get(id(frame)) is frame:
                torch = sys.modules.get("torch")
                if torch is not None and self._statements.get(id(frame)) not in self._quiet:
                    self._activate(torch)
                    self._current = frame
                return
            if self.is_user_code(frame.f_code):
                return
            frame = frame.f_back

    def _activate(self, torch: Any) -> bool:
        if torch_compat.function_mode_depth(torch) != self.base_depth:
            return False  # the user's own mode is active: never reorder their stack
        torch_compat.push_function_mode(torch, self._mode)
        self._active = True
        return True

    def _deactivate(self) -> bool:
        torch = sys.modules["torch"]
        if torch_compat.top_function_mode(torch) is not self._mode:
            return False
        torch_compat.pop_function_mode(torch)
        self._active = self.passing = False
        self.forget_walk()
        unhook, self._unhook = self._unhook, None
        if unhook is not None:
            unhook()
        return True

    def _pop_when_passing(self) -> None:
        """A module call or an optimizer step begins: a mode that only passes calls on goes
        (a trace callback's rules, in torch's hooks: nothing may reach the program)."""
        with contextlib.suppress(Exception):
            if self.passing and self._active:
                self._deactivate()

    def _unused_call(self) -> None:
        """A call of the watched hit that no rule looks at: past :data:`QUIET_AFTER` of
        them its statement goes quiet (see the module's doc)."""
        current = self._current
        if current is None or id(current) not in self._unused:
            return
        count = self._unused[id(current)] = self._unused[id(current)] + 1
        if count > QUIET_AFTER:
            self._go_quiet(current)

    def _go_quiet(self, current: FrameType) -> None:
        """The statement ``current`` runs passes its calls on for the rest of its hit, and
        is not watched again."""
        statement = self._statements.get(id(current))
        if statement is not None:
            self._quiet.add(statement)
            self.passing = True
            if self._unhook is None:
                self._unhook = torch_compat.before_next_module_call_or_step(
                    sys.modules["torch"], self._pop_when_passing
                )

    def forget_walk(self) -> None:
        self._last_walk = _FORGOTTEN

    def watching(self) -> bool:
        return bool(self._frames)

    def failure_in(
        self, frame: FrameType, exc: BaseException, tb: TracebackType | None = None
    ) -> FailedCall | None:
        """The watched call that raised ``exc`` and was made by ``frame``, if any; the
        mode's frames are taken out of the traceback (``tb``, else the exception's)."""
        failed = self._failed
        if failed is None or failed.exc is not exc or failed.frame is not frame:
            return None
        self._failed = None
        with contextlib.suppress(Exception):  # the user frame's entry leads the traceback
            skip_the_mode(tb or exc.__traceback__, self._hidden_files())
        return failed

    def take_failed(self) -> FailedCall | None:
        """The failed call kept, whatever frame made it (a replay's)."""
        failed, self._failed = self._failed, None
        return failed

    def _hidden_files(self) -> tuple[str, ...]:
        overrides = os.path.join(self._torch_dir, "overrides.py")  # handle_torch_function
        return (__file__, overrides)

    def seen(
        self,
        func: Any,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        result: Any,
        caller: FrameType | None,
    ) -> None:
        """``func`` ran: hand a watched statement's elementwise ops to ``on_op``, and every
        call it made (directly, or in a module it called) to ``on_call``."""
        if caller is None:
            return
        cached = self._last_walk
        if cached[0] is not caller:  # the same for every op a frame makes
            cached = self._last_walk = (caller, self._walk(caller))
        if cached[1] is _HOUSEKEEPING:
            if self._current is not None:
                self._go_quiet(self._current)
            return
        frame, direct, module, wrapper = cached[1]
        if frame is None or not (direct or module is not None):
            self._unused_call()  # library code's own calls (an optimizer's updates)
            if frame is None:
                return
        spec = _OPS.get(getattr(func, "__name__", "")) if direct else None
        if spec is not None and len(args) >= 2:
            symbol, reversed_ = spec
            left, right = (args[1], args[0]) if reversed_ else (args[0], args[1])
            self.on_op(frame, symbol, left, right, result)
        if self.on_call is not None:
            tensor = self._tensor
            # Most calls return one tensor: no scan of a one-item tuple.
            results = [result] if isinstance(result, tensor) else _tensors(tensor, (result,), {})
            if not results and args and getattr(func, "__name__", "") == "__setitem__":
                results = [args[0]]  # `x[:, 0] = 0`: changed in place, returns nothing
            if results:
                inputs = _tensors(tensor, args, kwargs)
                label = type(module).__name__ if module is not None else self._label(func)
                self.on_call(
                    Called(frame, label, func, args, kwargs, inputs, results, direct, wrapper)
                )

    def _label(self, func: Any) -> str:
        label = self._labels.get(id(func))
        if label is None:  # torch's functions live as long as torch: their ids stay theirs
            label = self._labels[id(func)] = op_label(func)
        return label

    def _walk(self, caller: FrameType) -> Walked:
        """(the watched frame, called directly, the module called, the torch.nn module whose
        own forward made the call): the watched frame of user code that made a call from
        ``caller`` through torch's own Python code (its wrappers, module calls, the
        DataLoader's collate), None for any other."""
        frame: FrameType | None = caller
        direct = True  # through torch's Python wrappers only, no module call between
        module: Any = None
        modules = 0
        forward_depth = 0
        below: FrameType | None = None
        for depth in range(_MAX_DEPTH):
            if frame is None:
                return _NOWHERE
            if self._frames.get(id(frame)) is frame:
                wrapper = module if modules == 1 and forward_depth <= 3 else None
                if wrapper is not None and not is_torch_module(wrapper):
                    wrapper = None
                return frame, direct, module, wrapper
            code = frame.f_code
            if not code.co_filename.startswith(self._torch_dir):
                if code.co_name in INLINE_CODE_NAMES:  # a generator expression's calls are
                    frame = frame.f_back  # those of the statement that consumes it
                    continue
                return _NOWHERE
            if (
                depth < 3
                and not modules
                and (code.co_name == _ZERO_GRAD or code.co_filename.startswith(self._optim_dir))
            ):
                return _HOUSEKEEPING  # an optimizer's or zero_grad's own call, not a module's
            if code.co_name == torch_compat.MODULE_CALL_FRAME and below is not None:
                direct = False
                module = module_of(below)
                modules += 1
                forward_depth = forward_depth or depth
            elif depth >= 3:
                direct = False
            if not is_call_helper(code):
                below = frame
            frame = frame.f_back
        return _NOWHERE

    def failed(
        self,
        func: Any,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        exc: BaseException,
        caller: FrameType | None,
    ) -> None:
        """``func`` raised: keep it with the innermost user frame that called it, and the
        module that user frame called on the way (``self.emb(idx)`` → ``F.embedding``)."""
        frame = caller
        below: FrameType | None = None
        modules: list[ModuleCall] = []
        inline: list[FrameType] = []
        for _ in range(_MAX_DEPTH):
            if frame is None:
                return
            if self.is_user_code(frame.f_code):
                break
            if frame.f_code.co_name in INLINE_CODE_NAMES:
                inline.append(frame)
            if frame.f_code.co_name == torch_compat.MODULE_CALL_FRAME and below is not None:
                modules.append(forward_call(below))  # the forward Module.__call__ ran
            if not is_call_helper(frame.f_code):
                below = frame
            frame = frame.f_back
        else:
            return
        if self._judged >= _MAX_JUDGED:
            return  # a program that keeps catching torch's errors: it knows what it does
        self._judged += 1
        verdict = judge(sys.modules["torch"], func, args, kwargs)
        file = frame.f_code.co_filename
        self._failed = FailedCall(
            func=func, args=args, kwargs=kwargs, exc=exc, frame=frame, modules=tuple(modules),
            verdict=verdict, inline=tuple(f for f in inline if f.f_code.co_filename == file),
        )  # fmt: skip


def _tensors(tensor: type, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[Any]:
    """The tensors among a call's arguments (and one level into lists: ``torch.cat``)."""
    found = []
    for value in (*args, *kwargs.values()):
        if isinstance(value, tensor):
            found.append(value)
        elif isinstance(value, (list, tuple)):
            found.extend(item for item in value[:8] if isinstance(item, tensor))
    return found


def _make_mode(torch: Any, watch: OpWatch) -> Any:
    class _WatchMode(torch.overrides.TorchFunctionMode):  # type: ignore[misc]
        def __torch_function__(
            self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None
        ) -> Any:
            caller = sys._getframe(1)
            if kwargs is None:
                kwargs = {}
            if watch.passing or caller.f_code.co_filename.startswith(_OURS):
                return func(*args, **kwargs)  # a quiet statement's, or our own read
            if watch._last_walk[0] is not caller:
                watch._last_walk = _FORGOTTEN  # before the op allocates: its frame's locals may go
            try:
                with shown_at_the_caller(func, caller):  # its warnings: the call's, not ours
                    result = func(*args, **kwargs)
            except Exception as exc:
                try:  # noqa: SIM105 - never an error of ours in the program
                    watch.failed(func, args, kwargs, exc, caller)
                except Exception:
                    pass
                raise
            # Not contextlib.suppress, on every watched call: a try costs nothing until it raises.
            try:  # noqa: SIM105
                watch.seen(func, args, kwargs, result, caller)
            except Exception:
                pass
            return result

    return _WatchMode()
