"""Where a non-finite value was made: the first torch call whose inputs were finite and whose
result is not.

A loss read as NaN on the statement that computed it (``loss = bce(model(x), y)``) was
made somewhere in the calls it made: a ``torch.log`` of a probability that rounded to
exactly 1 in a helper, an ``exp`` that overflowed in a forward. The statement is still
there, with the very values it took (the optimizer has not stepped yet: a loss is probed on
every hit), so it runs again, once, with a torch function mode that scans each call's
result: the first call that makes a NaN out of inputs without one, or an Inf out of finite
inputs on a line that is not a mask, is the origin, on its own line. Real values this time:
a NaN needs data. So nothing of the program changes, the replay runs without gradients,
writes in place (a BatchNorm's running statistics) go to copies, the random number
generator is put back, and its output is discarded.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from types import CodeType, FrameType
from typing import Any

from shapelens.engine.findings.call_mode import call_mode
from shapelens.engine.findings.context import Origin, named_values, resolver
from shapelens.engine.findings.nonfinite_scan import NonfiniteScan
from shapelens.engine.findings.op_names import name_of
from shapelens.engine.findings.replay import binding_line, compiled_expression, quiet
from shapelens.engine.recording import values
from shapelens.engine.recording.code_info import CodeInfo
from shapelens.engine.torch_support import torch_compat

MAX_OPS = 20_000
MAX_BACK = 4
"""Statements followed back through the locals that carried a non-finite value in."""
_WRITES_INTO = frozenset({"batch_norm", "instance_norm", "__setitem__"})
_MAX_DEPTH = 40


class OriginSearch:
    def __init__(self, known: Callable[[CodeType], CodeInfo | None], scan: NonfiniteScan) -> None:
        self.known = known
        self.scan = scan
        self.left = 2

    def find(self, frame: FrameType, info: CodeInfo, line: int) -> Origin | None:
        """The call that made the first non-finite value of statement ``line`` of ``frame``:
        where a local it reads holds one already, first back to the statement that bound
        that local (its inputs are in the frame still), then that statement run again. None:
        no call made one, or it cannot run again."""
        torch = sys.modules.get("torch")
        if torch is None or self.left <= 0 or torch_compat.function_mode_depth(torch) != 0:
            return None
        for _ in range(MAX_BACK):
            carried = self._carried_input(frame, info, line)
            earlier = None if carried is None else binding_line(info, carried, line)
            if earlier is None or earlier == line:
                break
            line = earlier
        return self._replay(torch, frame, info, line)

    def _carried_input(self, frame: FrameType, info: CodeInfo, line: int) -> str | None:
        """A local the statement reads that holds a non-finite value already."""
        statement = info.source.statements.get(line)
        if statement is None:
            return None
        for named in named_values(statement, resolver(frame)):
            if named.is_module or "." in named.label or "[" in named.label:
                continue
            flags = self.scan.flags(named.value, values.kind_of(named.value))
            if flags is not None and any(flags):
                return named.label
        return None

    def _replay(self, torch: Any, frame: FrameType, info: CodeInfo, line: int) -> Origin | None:
        code = compiled_expression(info.source.statements.get(line), info.file)
        if code is None:
            return None
        self.left -= 1
        search = _Search(self, torch, code, info, line)
        state = torch.random.get_rng_state()
        try:
            with quiet(), torch.no_grad(), call_mode(torch, search.call):
                eval(code, frame.f_globals, dict(frame.f_locals))
        except Exception:
            pass  # a statement that needs what it computed before cannot run again
        finally:
            torch.random.set_rng_state(state)
        return search.origin


class _Search:
    def __init__(
        self, owner: OriginSearch, torch: Any, code: CodeType, info: CodeInfo, line: int
    ) -> None:
        self.owner = owner
        self.torch = torch
        self.code = code
        self.info = info
        self.line = line
        self.origin: Origin | None = None
        self.ops = 0
        self.calls: dict[tuple[int, int, str], int] = {}
        """(code, line, op name) → the calls of it a user frame made directly so far."""

    def call(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        self.ops += 1
        if self.ops > MAX_OPS:
            raise RuntimeError("the replay ran too long")
        if _writes_into(func):
            args, kwargs = torch_compat.tree_map(self._copy, (args, kwargs))
        caller = sys._getframe(2)  # past the mode's __torch_function__
        result = func(*args, **kwargs)
        if self.origin is None:
            direct = self._statement_of(caller)
            key = (id(caller.f_code), direct or 0, name_of(func))
            nth = self.calls.get(key, 0) if direct else 0
            self._judge(func, args, kwargs, result, caller, nth)
            if direct:
                self.calls[key] = nth + 1
        return result

    def _statement_of(self, caller: Any) -> int | None:
        """The statement a user frame made this call from itself (not through a function
        it called), or None."""
        if caller.f_code is self.code:
            return self.line
        info = self.owner.known(caller.f_code)
        return None if info is None else info.statement_of.get(caller.f_lineno, caller.f_lineno)

    def _copy(self, value: Any) -> Any:
        if isinstance(value, self.torch.Tensor) and type(value).__name__ != "Parameter":
            return value.clone()
        return value

    def _judge(
        self,
        func: Any,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        result: Any,
        caller: Any,
        nth: int,
    ) -> None:
        tensor = self.torch.Tensor
        outputs = [x for x in torch_compat.tree_leaves(result) if isinstance(x, tensor)]
        flags = [self.owner.scan.flags(x, values.TORCH) for x in outputs]
        made = [(x, f) for x, f in zip(outputs, flags, strict=True) if f is not None and any(f)]
        if not made:
            return
        inputs = [x for x in torch_compat.tree_leaves((args, kwargs)) if isinstance(x, tensor)]
        before = [self.owner.scan.flags(x, values.TORCH) for x in inputs]
        had_nan = any(f is not None and f[0] for f in before)
        had_inf = any(f is not None and f[1] for f in before)
        result_made, (nan, inf) = made[0]
        if (nan and not had_nan) or (inf and not (had_nan or had_inf)):
            where = self._user_line(caller)
            if where is not None:
                info, line = where
                state = "NaN" if nan else "Inf"
                self.origin = Origin(info, line, func, inputs, result_made, state, nth)

    def _user_line(self, caller: Any) -> tuple[CodeInfo, int] | None:
        frame = caller
        for _ in range(_MAX_DEPTH):
            if frame is None:
                return None
            if frame.f_code is self.code:
                return self.info, self.line
            info = self.owner.known(frame.f_code)
            if info is not None:
                return info, info.statement_of.get(frame.f_lineno, frame.f_lineno)
            frame = frame.f_back
        return None


def _writes_into(func: Any) -> bool:
    name = name_of(func)
    return name in _WRITES_INTO or (name.endswith("_") and not name.startswith("__"))
