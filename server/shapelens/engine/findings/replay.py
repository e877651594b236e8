"""A failing statement run again on fake copies of its tensors, on a hit the op watch did
not follow.

The op watch sees a statement's torch calls on its checked hits only (1 to 4, 8, 16, …);
a call that fails on another hit (the last, smaller batch of the third epoch) is explained
here, while the failing frame is still alive: its statement runs again under a fake mode
(metadata only: no data is read or written, no real tensor changes) with a torch function
mode that sees every call. The call that fails is kept with its operands as passed, and
each result with the line that made it, so the finding and its chain are those of hit 1.

While the program runs, only the failing statement runs again: below the innermost frame
of user code there is only library code, and the program may catch the error and go on.
To reach the line where a wrong value started, once the run has ended with the error
(:meth:`Replay.run_outer`: nothing of the program runs after it) a replay starts from a
caller's statement in the traceback when the failing code runs once per call there (``out =
model(x)`` runs ``forward`` from its top again); never across a loop over data (a
DataLoader would start over), a generator, or past :data:`MAX_OUTER` callers. A replay
whose failure is not the program's (another line, or none) is dropped, and an inner start
is tried. Its output is discarded. At most :data:`MAX_REPLAYS` per run, each within
:data:`MAX_OPS` torch calls and :data:`MAX_SECONDS`.
"""

from __future__ import annotations

import ast
import contextlib
import copy
import io
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from types import CodeType, FrameType
from typing import Any, NamedTuple

from shapelens.engine.findings.call_mode import call_mode
from shapelens.engine.findings.context import Birth, OriginOf, load_paths, resolver
from shapelens.engine.findings.forward_frames import is_call_helper, module_of
from shapelens.engine.findings.op_names import op_label
from shapelens.engine.findings.op_watch import FailedCall, OpWatch
from shapelens.engine.findings.provenance import Provenance
from shapelens.engine.recording import values
from shapelens.engine.recording.code_info import CodeInfo
from shapelens.engine.torch_support import torch_compat

MAX_REPLAYS = 8
MAX_OPS = 20_000
MAX_SECONDS = 3.0
MAX_OUTER = 3
"""Callers a replay may start from, above the failing frame."""
MAX_CONVERTED = 64
"""A local container of more tensors than this stays as it is (the fake mode reads it)."""
_MAX_DEPTH = 40
_DETERMINISTIC_CALLS = frozenset({"range", "enumerate", "zip", "reversed", "len"})


class Replayed(NamedTuple):
    """A replay that failed where the program did."""

    failed: FailedCall
    provenance: Provenance
    """Where each result of the replay came from (its calls only)."""
    origin_of: OriginOf
    """A replay's value → where it was born (its real twin's record, else a guess)."""
    keep: list[Any]
    """The fake tensors and their real twins, alive while the finding is made."""


class Bound(NamedTuple):
    """A replayed value's guessed birth: the statement of the start frame that binds the
    local it copies (the run did not read it on this hit)."""

    file: str
    line: int
    name: str
    is_argument: bool


class _OutOfBudget(BaseException):
    """A replay that ran too long: stopped (a BaseException: user code must not catch it)."""


class Replay:
    """Replays for one run: ``known`` tells user code (its :class:`CodeInfo`), ``origin_of``
    where the program's values were born."""

    def __init__(self, known: Callable[[CodeType], CodeInfo | None], origin_of: OriginOf) -> None:
        self.known = known
        self.origin_of = origin_of
        self.left = MAX_REPLAYS

    def run(
        self, frame: FrameType, info: CodeInfo, line: int, exc: BaseException
    ) -> Replayed | None:
        """``exc`` left ``frame`` (user code, statement ``line``) from a torch call the op watch
        did not see: the replay of that statement that fails there, or None."""
        return self._first((frame, info, line), [(frame, info, line)], exc)

    def run_outer(
        self, frame: FrameType, info: CodeInfo, line: int, exc: BaseException
    ) -> Replayed | None:
        """The run ended with ``exc``, which left ``frame`` (statement ``line``): the replay
        from the outermost caller that reaches the failure again (the inner ones after)."""
        starts = self._starts(frame, info, line)
        if len(starts) < 2:
            return None
        return self._first((frame, info, line), starts[:-1], exc)

    def _first(
        self,
        failing: tuple[FrameType, CodeInfo, int],
        starts: list[tuple[FrameType, CodeInfo, int]],
        exc: BaseException,
    ) -> Replayed | None:
        torch = sys.modules.get("torch")
        if torch is None or self.left <= 0 or torch_compat.dispatch_mode_active(torch):
            return None
        compiler = getattr(torch, "compiler", None)
        if compiler is not None and compiler.is_compiling():
            return None
        if torch_compat.function_mode_depth(torch) != 0:
            return None  # another mode (the user's, the op watch's) would see the replay
        self.left -= 1
        frame, _, line = failing
        for start in starts:
            try:
                replayed = _Attempt(self, torch, start, (frame.f_code, line)).run()
            except Exception:
                replayed = None  # never an error of ours in the program
            if replayed is not None:
                return replayed
        return None

    def _starts(
        self, frame: FrameType, info: CodeInfo, line: int
    ) -> list[tuple[FrameType, CodeInfo, int]]:
        """Where a replay may start, outermost first: the failing statement, and the
        statements of callers that run the failing code once from its top."""
        starts = [(frame, info, line)]
        current, current_info, current_line = frame, info, line
        while len(starts) <= MAX_OUTER:
            if current_info.is_generator or current_info.is_module:
                break
            if not _runs_once(current_info, current_line):
                break
            caller = self._user_caller(current)
            if caller is None:
                break
            caller_info = self.known(caller.f_code)
            if caller_info is None:
                break
            caller_line = caller_info.statement_of.get(caller.f_lineno, caller.f_lineno)
            if expression_of(caller_info.source.statements.get(caller_line)) is None:
                break
            starts.append((caller, caller_info, caller_line))
            current, current_info, current_line = caller, caller_info, caller_line
        starts.reverse()
        return starts

    def _user_caller(self, frame: FrameType) -> FrameType | None:
        caller = frame.f_back
        for _ in range(_MAX_DEPTH):
            if caller is None or self.known(caller.f_code) is not None:
                return caller
            caller = caller.f_back
        return None


class _Attempt:
    """One replay from one start."""

    def __init__(
        self,
        replay: Replay,
        torch: Any,
        start: tuple[FrameType, CodeInfo, int],
        target: tuple[CodeType, int],
    ) -> None:
        self.replay = replay
        self.torch = torch
        self.frame, self.info, self.line = start
        self.target = target
        self.provenance = Provenance()
        self.fake_mode = torch_compat.replay_fake_mode()
        self.fake_type = torch_compat.fake_tensor_types()[0]
        self.twins: dict[int, Any] = {}
        """id of a fake copy → the real tensor it copies."""
        self.names: dict[int, str] = {}
        """id of a fake copy of a local of the start frame → that local's name."""
        self.keep: list[Any] = []
        self.failure: tuple[Any, tuple[Any, ...], dict[str, Any], BaseException, Any] | None = None
        self.ops = 0
        self.deadline = time.monotonic() + MAX_SECONDS
        self.code: CodeType | None = None

    def run(self) -> Replayed | None:
        statement = self.info.source.statements.get(self.line)
        self.code = _replayable(statement, self.frame, self.torch, self.info.file)
        if self.code is None:
            return None
        namespace = self._fake_locals()
        with quiet(), self.fake_mode, call_mode(self.torch, self.call):
            try:
                eval(self.code, self.frame.f_globals, namespace)
            except _OutOfBudget:
                return None
            except Exception:
                pass  # the failure, kept by the mode
        if self.failure is None:
            return None
        func, args, kwargs, exc, caller = self.failure
        watch = OpWatch(lambda *_: None, self._is_user_code)
        watch.failed(func, args, kwargs, exc, caller)  # as the op watch keeps a failure
        failed = watch.take_failed()
        if failed is None or not self._is_target(failed.frame):
            return None
        return Replayed(failed, self.provenance, self._origin_of, self.keep)

    # -- values ---------------------------------------------------------------------------
    def _fake_locals(self) -> dict[str, Any]:
        namespace = {}
        for name, value in self.frame.f_locals.items():
            namespace[name] = faked = self._faked(value)
            if faked is not value and isinstance(value, self.torch.Tensor):
                self.names[id(faked)] = name
        return namespace

    def _faked(self, value: Any) -> Any:
        tensor = self.torch.Tensor
        if isinstance(value, tensor):
            return self._fake(value)
        kind = values.kind_of(value)
        if kind not in values.CONTAINER_KINDS:
            return value
        try:
            leaves = torch_compat.tree_leaves(value)
        except Exception:
            return value
        if len(leaves) > MAX_CONVERTED or not any(isinstance(x, tensor) for x in leaves):
            return value
        return torch_compat.tree_map(lambda x: self._fake(x) if isinstance(x, tensor) else x, value)

    def _fake(self, real: Any) -> Any:
        if isinstance(real, self.fake_type) or type(real).__name__ == "Parameter":
            return real  # a parameter is read, never written, by a forward: the mode copies it
        fake = self.fake_mode.from_tensor(real)
        self.twins[id(fake)] = real
        self.keep.extend((fake, real))
        return fake

    def _origin_of(self, value: Any) -> Birth | None:
        found: Birth | None = self.replay.origin_of(self.twins.get(id(value), value))
        name = self.names.get(id(value))
        if found is not None or name is None:
            return found
        info = self.info  # not read on this hit: the statement that binds the local
        line = binding_line(info, name, self.line)
        if line is not None:
            return Bound(info.file, line, name, is_argument=False)
        if name in info.arg_names:
            return Bound(info.file, info.def_line, name, is_argument=True)
        return None

    # -- what the mode sees ---------------------------------------------------------------
    def call(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        self.ops += 1
        if self.ops > MAX_OPS or (self.ops % 256 == 0 and time.monotonic() > self.deadline):
            raise _OutOfBudget
        args, kwargs = torch_compat.tree_map(self._as_fake, (args, kwargs))
        caller = sys._getframe(2)  # past the mode's __torch_function__
        try:
            result = func(*args, **kwargs)
        except Exception as exc:
            if self.failure is None:
                self.failure = (func, args, kwargs, exc, caller)
            raise
        with contextlib.suppress(Exception):
            self._record(func, args, kwargs, result, caller)
        return result

    def _as_fake(self, value: Any) -> Any:
        if isinstance(value, self.torch.Tensor) and not isinstance(value, self.fake_type):
            return self._fake(value)  # a real tensor met on the way (a buffer): never written
        return value

    def _record(
        self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], result: Any, caller: Any
    ) -> None:
        found = self._user_frame(caller)
        if found is None:
            return
        frame, info, module = found
        line = (
            self.line
            if frame.f_code is self.code
            else info.statement_of.get(frame.f_lineno, frame.f_lineno)
        )
        tensor = self.torch.Tensor
        inputs = [x for x in torch_compat.tree_leaves((args, kwargs)) if isinstance(x, tensor)]
        results = [x for x in torch_compat.tree_leaves(result) if isinstance(x, tensor)]
        op = type(module).__name__ if module is not None else op_label(func)
        text = info.source.statement_text(line) or None
        for made in results[:4]:
            self.provenance.record(
                file=info.file, line=line, expression=text, op=op, inputs=inputs, result=made
            )

    def _user_frame(self, caller: Any) -> tuple[FrameType, CodeInfo, Any] | None:
        """The innermost frame of user code that made a call from ``caller`` (through
        torch's code), and the module it called on the way."""
        frame, module, below = caller, None, None
        for _ in range(_MAX_DEPTH):
            if frame is None:
                return None
            info = self._info(frame.f_code)
            if info is not None:
                return frame, info, module
            if frame.f_code.co_name == torch_compat.MODULE_CALL_FRAME and below is not None:
                module = module_of(below)
            if not is_call_helper(frame.f_code):
                below = frame
            frame = frame.f_back
        return None

    def _info(self, code: CodeType) -> CodeInfo | None:
        return self.info if code is self.code else self.replay.known(code)

    def _is_user_code(self, code: CodeType) -> object:
        return self._info(code)

    def _is_target(self, frame: FrameType | None) -> bool:
        if frame is None:
            return False
        code, line = self.target
        if frame.f_code is self.code:  # the replayed statement itself failed
            return self.frame.f_code is code and self.line == line
        info = self.replay.known(frame.f_code)
        return (
            frame.f_code is code
            and info is not None
            and info.statement_of.get(frame.f_lineno, frame.f_lineno) == line
        )


def expression_of(statement: ast.AST | None) -> ast.expr | None:
    """What a statement computes, to run again without binding anything: an assignment's
    value, an augmented assignment as its operation, an expression, a return's value."""
    if isinstance(statement, ast.Assign | ast.AnnAssign | ast.Return) and statement.value:
        return statement.value
    if isinstance(statement, ast.Expr):
        return statement.value
    if isinstance(statement, ast.AugAssign):
        target = copy.deepcopy(statement.target)
        _to_load(target)
        return ast.copy_location(ast.BinOp(target, statement.op, statement.value), statement)
    return None


def _to_load(node: ast.AST) -> None:
    for child in ast.walk(node):
        if hasattr(child, "ctx"):
            child.ctx = ast.Load()


def _replayable(
    statement: ast.AST | None, frame: FrameType, torch: Any, file: str
) -> CodeType | None:
    """What to run again, as code whose line numbers are the program's: a store into a
    tensor (``queue[:, i : i + n] = keys.T``) whole, its names bound in the replay's own
    namespace; else what the statement computes (:func:`expression_of`)."""
    if isinstance(statement, ast.Assign | ast.AugAssign | ast.AnnAssign):
        targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
        stores = [t for t in targets if isinstance(t, ast.Subscript)]
        names = [t for t in targets if isinstance(t, ast.Name)]
        resolve = resolver(frame)
        if (
            stores
            and len(stores) + len(names) == len(targets)
            and all(_is_tensor_path(resolve, t.value, torch) for t in stores)
        ):
            module = ast.Module(body=[copy.deepcopy(statement)], type_ignores=[])
            ast.fix_missing_locations(module)
            return compile(module, file, "exec", dont_inherit=True)
    return compiled_expression(statement, file)


def compiled_expression(statement: ast.AST | None, file: str) -> CodeType | None:
    """What the statement computes (:func:`expression_of`), as code whose line numbers are
    the program's; None for a statement that computes nothing to run again."""
    expression = expression_of(statement)
    if expression is None:
        return None
    tree = ast.Expression(body=copy.deepcopy(expression))
    ast.fix_missing_locations(tree)
    return compile(tree, file, "eval", dont_inherit=True)


def _is_tensor_path(resolve: Any, node: ast.expr, torch: Any) -> bool:
    """``node`` is a name or an attribute path (``self.queue``) holding a tensor: a store
    into it is replayed on its fake copy, never into a list or dict of the program's."""
    paths = load_paths(node)
    return bool(paths) and isinstance(resolve(paths[0]), torch.Tensor)


def binding_line(info: CodeInfo, name: str, line: int) -> int | None:
    """The statement that last bound ``name`` before ``line`` ran: the latest one above it,
    or, in a loop, one below it in the same loop (bound on the previous pass)."""
    stores = [n for n, stored in info.stores.items() if name in stored]
    loop = info.counter_of.get(line, info.def_line)
    same_loop = [n for n in stores if info.counter_of.get(n, info.def_line) == loop]
    above = [n for n in same_loop if n <= line]
    if above:
        return max(above)
    if same_loop and loop != info.def_line:
        return max(same_loop)
    earlier = [n for n in stores if n <= line]
    return max(earlier) if earlier else None


def _runs_once(info: CodeInfo, line: int) -> bool:
    """Whether running the function of ``info`` from its top runs ``line`` as the failing
    call did: not inside a loop over data (one over ``self.blocks`` or a ``range`` is the
    same every time)."""
    seen = 0
    counter = info.counter_of.get(line, info.def_line)
    while counter != info.def_line and counter != line and seen < 16:
        header = info.source.statements.get(counter)
        if not isinstance(header, ast.For | ast.AsyncFor) or not _same_every_time(header.iter):
            return False
        line, counter = counter, info.counter_of.get(counter, info.def_line)
        seen += 1
    return True


def _same_every_time(node: ast.expr) -> bool:
    """An iterable the function's state decides: ``self.layers``, ``range(n)``,
    ``zip(self.a, self.b)``, a literal."""
    if isinstance(node, ast.Attribute):
        while isinstance(node, ast.Attribute):
            node = node.value
        return isinstance(node, ast.Name) and node.id == "self"
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, ast.List | ast.Tuple):
        return all(_same_every_time(element) for element in node.elts)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        return node.func.id in _DETERMINISTIC_CALLS and all(
            _same_every_time(argument) or isinstance(argument, ast.Name | ast.BinOp)
            for argument in node.args
        )
    return False


class _Discard(io.TextIOBase):
    def write(self, text: str) -> int:
        return len(text)


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """The replay's output is not the program's: its prints, warnings and the fake
    kernels' logged tracebacks go nowhere."""
    logging = sys.modules["logging"]  # torch's import brought it (not the child's: ~2.5 ms)
    logger = logging.getLogger(torch_compat.FAKE_TENSOR_LOGGER)
    saved = sys.stdout, sys.stderr, logger.disabled
    sys.stdout = sys.stderr = _Discard()
    logger.disabled = True
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        sys.stdout, sys.stderr, logger.disabled = saved


def names_tensors(info: CodeInfo, line: int, frame: FrameType) -> bool:
    """Whether the failing statement is about tensors, so worth a replay: it names a tensor,
    a container of them or an ``nn.Module``, or calls into torch (a program that catches
    its own ``ValueError`` of ``int(text)`` gets no replay)."""
    torch = sys.modules.get("torch")
    statement = info.source.statements.get(line)
    if torch is None or statement is None:
        return False
    resolve = resolver(frame)
    for path in load_paths(statement):
        value = resolve(path)
        if isinstance(value, torch.Tensor | torch.nn.Module):
            return True
        if getattr(value, "__module__", None) and str(value.__module__).startswith("torch"):
            return True
        if values.kind_of(value) in values.CONTAINER_KINDS:
            with contextlib.suppress(Exception):
                if any(isinstance(x, torch.Tensor) for x in torch_compat.tree_leaves(value)):
                    return True
    return False
