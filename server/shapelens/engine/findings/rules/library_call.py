"""An error a library's own Python code raised from the user's call with tensors: an
``nn.LSTM`` that checks the hidden state it was given, ``nn.MultiheadAttention``'s
assertion on a padding mask, einops' pattern that does not fit the tensor.

No torch op failed, so the op watch has no failing call to show; the call the user made
is still observed: the traceback enters the library from the user's statement, and the
library's first frame holds what it was given. The finding names that call as written
(``self.lstm`` (LSTM), ``rearrange``) and every tensor it was passed, as passed
(``state[1]``, ``key_padding_mask=``), with the line where each was born.
"""

from __future__ import annotations

import ast
import sys
from dataclasses import replace
from types import FrameType, TracebackType
from typing import Any

from shapelens.engine.findings.context import Named, RunFacts, load_paths, resolver
from shapelens.engine.findings.events import Raised
from shapelens.engine.findings.rules.einops_patterns import pattern_advice
from shapelens.engine.findings.rules.failed_call import leaves_as_passed
from shapelens.engine.findings.rules.mismatch import (
    devices_disagree,
    explain_all,
    mismatch_kind,
    operand_of,
)
from shapelens.engine.source.segments import segment
from shapelens.engine.torch_support import torch_compat
from shapelens.trace.finding import Finding

LIBRARY_ERRORS = (RuntimeError, ValueError, TypeError, IndexError, AssertionError)
"""What a library raises when the tensors it was given do not fit (einops' EinopsError is a
RuntimeError)."""
_MAX_OPERANDS = 8
_VARARGS, _VARKEYWORDS = 0x04, 0x08


class ExplainLibraryCall:
    def __init__(self, facts: RunFacts) -> None:
        self.facts = facts

    def explain(self, seen: Raised) -> list[Finding]:
        if not isinstance(seen.exc, LIBRARY_ERRORS):
            return []
        try:
            return self._explain(seen)
        except Exception:  # a library's frame we cannot read: no finding rather than a wrong one
            return []

    def _explain(self, seen: Raised) -> list[Finding]:
        entered = _library_frame(seen.tb, seen.frame)
        statement = seen.info.source.statements.get(seen.line)
        if entered is None or statement is None:
            return []
        callee, args, kwargs = _what_it_was_given(entered)
        call = _call_of(statement, callee, resolver(seen.frame))
        if call is None:
            return []
        lines = seen.info.source.lines

        def text(node: ast.AST) -> str:
            return " ".join((segment(lines, node) or "?").split())

        passed: list[tuple[str, Any]] = []
        for index, value in enumerate(args):
            node = call.args[index] if index < len(call.args) else None
            written = text(node) if node is not None else f"argument {index + 1}"
            passed.extend(leaves_as_passed(written, value, node, text))
        for keyword in call.keywords:
            if keyword.arg is not None and keyword.arg in kwargs:
                written = f"{keyword.arg}={text(keyword.value)}"
                passed.extend(leaves_as_passed(written, kwargs[keyword.arg], keyword.value, text))
        tensor = sys.modules["torch"].Tensor
        named: list[Named] = []
        for label, value in passed:  # `attn(x, x, x)`: one tensor, shown once
            if isinstance(value, tensor) and all(value is not n.value for n in named):
                named.append(_named(label, value))
        if not named:
            return []  # a library's error about something else than tensors
        message = str(seen.exc).strip()
        first = message.splitlines()[0] if message else type(seen.exc).__name__
        op = _label(call, callee, text)
        advice = _einops(entered, args, kwargs)
        expression = seen.info.source.statement_text(seen.line) or None
        kind = mismatch_kind(seen.exc, LIBRARY_ERRORS) or devices_disagree(named)
        if kind is not None:  # the odd operand and what the others agree on, as for an op
            found = explain_all(
                kind, named[:_MAX_OPERANDS], self.facts.origin_of, seen.info.file, seen.line,
                first, expression=expression,
            )  # fmt: skip
            return [replace(finding, op=op, advice=advice) for finding in found]
        operands = tuple(
            operand_of(n, self.facts.origin_of, odd=False) for n in named[:_MAX_OPERANDS]
        )
        return [
            Finding(
                kind="op_error", severity="error", file=seen.info.file, line=seen.line,
                expression=expression, operands=operands, error=first, op=op, advice=advice,
            )
        ]  # fmt: skip


def _einops(entered: FrameType, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str | None:
    """An einops call's pattern against the tensor it was given (rearrange, reduce, repeat:
    ``tensor, pattern, ..., **axes_lengths``)."""
    if "einops" not in entered.f_code.co_filename or len(args) < 2:
        return None
    tensor, pattern = args[0], args[1]
    shape = getattr(tensor, "shape", None)
    if shape is None:
        return None
    return pattern_advice(pattern, tuple(int(d) for d in shape), kwargs)


def _library_frame(tb: TracebackType | None, user: FrameType) -> FrameType | None:
    """The frame the traceback entered right after the user's ``frame``: library code."""
    while tb is not None and tb.tb_frame is not user:
        tb = tb.tb_next
    following = tb.tb_next if tb is not None else None
    return None if following is None else following.tb_frame


def _what_it_was_given(frame: FrameType) -> tuple[Any, tuple[Any, ...], dict[str, Any]]:
    """(what was called, its positional arguments, its keyword arguments), read from the
    library's first frame: a module call's ``self, *args, **kwargs``, else the function's
    own parameters."""
    local = frame.f_locals
    code = frame.f_code
    if code.co_name in torch_compat.MODULE_CALL_ENTRIES:
        return local.get("self"), tuple(local.get("args", ())), dict(local.get("kwargs", {}))
    count = code.co_argcount + code.co_kwonlyargcount
    args = tuple(local[name] for name in code.co_varnames[: code.co_argcount] if name in local)
    kwargs = {name: local[name] for name in code.co_varnames[:count] if name in local}
    if code.co_flags & _VARKEYWORDS:  # einops' rearrange(tensor, pattern, **axes_lengths)
        extra = local.get(code.co_varnames[count + bool(code.co_flags & _VARARGS)])
        if isinstance(extra, dict):
            kwargs.update(extra)
    return code, args, kwargs


def _call_of(statement: ast.AST, callee: Any, resolve: Any) -> ast.Call | None:
    """The call in the statement that went into the library: of ``callee`` (a module), or
    of a function whose code is ``callee``."""
    for node in ast.walk(statement):
        if not isinstance(node, ast.Call):
            continue
        paths = load_paths(node.func)
        value = resolve(paths[0]) if paths else None
        if value is not None and (value is callee or getattr(value, "__code__", None) is callee):
            return node
    return None


def _label(call: ast.Call, callee: Any, text: Any) -> str:
    written = str(text(call.func))
    if hasattr(callee, "co_name"):
        return written
    return f"`{written}` ({type(callee).__name__})"


def _named(label: str, value: Any) -> Named:
    return Named(label, value, tuple(value.shape), value.dtype, value.device, False)
