"""``op_error``: a backward that fails because a tensor it needs was changed in place after
the forward saved it ("one of the variables needed for gradient computation has been
modified by an inplace operation: [torch.FloatTensor [32, 64]], which is output 0 of
Sigmoid").

torch's message names the tensor's shape and the op that made it, never the line that
changed it, and the failing call (``loss.backward()``) names neither. Two causes are
explained:

- A result changed in place (``g += 0.1`` after ``g = torch.sigmoid(h)``). The op watch saw
  both calls (the fault is in the code: the first backward fails, and the first hits are
  watched), and the provenance kept where each result was made and first changed in place
  (:meth:`~shapelens.engine.findings.provenance.Provenance.record`).
- A weight changed by an optimizer's step between the forward and this backward (a GAN's
  generator loss, made before the discriminator's step and run backward after it): a leaf
  the backward reaches, of the message's shape (a view of it, ``AsStrided``: transposed)
  and version, held by an optimizer the failing frame names, whose ``step()`` is called
  on a line of that function before the failing one.
"""

from __future__ import annotations

import ast
import re
import sys
from typing import Any

from shapelens.engine.findings.context import RunFacts, load_paths, resolver
from shapelens.engine.findings.events import CallFailed, Raised
from shapelens.engine.findings.op_names import op_label
from shapelens.engine.findings.provenance import Made
from shapelens.engine.recording import values
from shapelens.engine.torch_support import torch_compat, torch_errors
from shapelens.trace.finding import CauseStep, Finding, Operand

_BACKWARD = re.compile(r"Backward\d*$")
_MADE_BY = {"addmm": ("linear",), "mm": ("linear", "matmul"), "bmm": ("matmul",)}
"""The autograd node that made a tensor → the calls (as the op watch labels them) that
make it under another name: a ``Linear``'s output is ``addmm``'s."""
_MAX_NODES = 4096
"""Nodes of the failing backward's graph walked for its leaves."""


class ExplainInPlace:
    """The in-place change behind a backward's "modified by an inplace operation"."""

    def __init__(self, facts: RunFacts) -> None:
        self.facts = facts

    def explain(self, seen: CallFailed | Raised) -> list[Finding]:
        try:
            return self._explain(seen)
        except Exception:
            return []  # a rule's fault is never the program's

    def _explain(self, seen: CallFailed | Raised) -> list[Finding]:
        text = str(seen.exc).strip()
        found = torch_errors.SAVED_TENSOR_CHANGED_ERROR.search(text)
        if found is None:
            return []
        shape = tuple(int(size) for size in found["shape"].split(",") if size.strip())
        maker = _word(_BACKWARD.sub("", found["node"] or ""))
        finding = self._changed_result(seen, shape, maker) or self._stepped_weight(
            seen, shape, int(found["version"])
        )
        if finding is None:
            return []
        info = seen.info
        return [
            Finding(
                kind="op_error",
                severity="error",
                file=info.file,
                line=seen.line,
                expression=info.source.statement_text(seen.line) or None,
                operands=(finding[0],),
                error=text.splitlines()[0],
                op=op_label(seen.failed.func) if isinstance(seen, CallFailed) else None,
                advice=finding[2],
                chain=(finding[1],),  # where it was made is its birth: the change alone
            )
        ]

    def _changed_result(
        self, seen: CallFailed | Raised, shape: tuple[int, ...], maker: str
    ) -> tuple[Operand, CauseStep, str] | None:
        """A result of a watched call, changed in place by a watched call."""
        provenance = (seen.provenance if isinstance(seen, CallFailed) else None) or (
            self.facts.provenance
        )
        makers = {maker, *_MADE_BY.get(maker, ())}
        chosen = [m for m in provenance.changed_in_place(shape) if _word(m.op) in makers]
        if not chosen:
            return None
        made = chosen[-1]  # the latest: the forward that this backward runs through
        assert made.changed is not None
        file, line, expression, op = made.changed
        subject = self._name(made) or "the tensor"
        made_shape, dtype, device = made.meta
        operand = Operand(
            name=subject, shape=made_shape, dtype=dtype, device=device,
            file=made.file, line=made.line, odd=True,
        )  # fmt: skip
        step = CauseStep(
            file=file, line=line, expression=expression, subject=subject,
            note=f"changed in place by `{expression or op}` ({op}) after {made.op} saved it "
            "for its backward",
        )  # fmt: skip
        advice = (
            f"{made.op} saved `{subject}` for its backward: change a copy "
            f"(`{subject} = {subject}.clone()` first) or use an op that is not in place"
        )
        return operand, step, advice

    def _stepped_weight(
        self, seen: CallFailed | Raised, shape: tuple[int, ...], version: int
    ) -> tuple[Operand, CauseStep, str] | None:
        """A weight the backward needs, changed by an optimizer's step since the forward."""
        frame = seen.failed.frame if isinstance(seen, CallFailed) else seen.frame
        resolve = resolver(frame)
        statement = seen.info.source.statements.get(seen.line)
        if statement is None:
            return None
        roots = [resolve(path) for path in load_paths(statement)]
        if isinstance(seen, CallFailed) and seen.failed.args:
            roots.insert(0, seen.failed.args[0])  # the tensor Tensor.backward was called on
        wanted = (shape, tuple(reversed(shape)))
        weights = [
            leaf
            for root in roots
            if getattr(root, "grad_fn", None) is not None
            for leaf in _leaves(root)
            if tuple(leaf.shape) in wanted and torch_compat.version_of(leaf) == version
        ]
        named = self._named_weight(frame.f_locals, weights)
        if named is None:
            return None
        weight, name, optimizer = named
        step_line = self._step_line(seen, optimizer, frame.f_code.co_firstlineno)
        if step_line is None:
            return None
        operand = Operand(
            name=name, shape=tuple(weight.shape), dtype=values.dtype_name(weight.dtype),
            device=values.device_name(weight.device), requires_grad=True, odd=True,
        )  # fmt: skip
        expression = seen.info.source.statement_text(step_line) or None
        step = CauseStep(
            file=seen.info.file, line=step_line, expression=expression, subject=name,
            note=f"changed in place by `{expression}` after the forward this backward runs "
            "through used it",
        )  # fmt: skip
        advice = (
            f"`{optimizer}.step()` updated `{name}` between this backward's forward and the "
            f"backward: run the backward before `{optimizer}.step()`, or the forward after it"
        )
        return operand, step, advice

    def _named_weight(
        self, local: dict[str, Any], weights: list[Any]
    ) -> tuple[Any, str, str] | None:
        """(the weight, its name from a module the frame holds, the optimizer holding it)."""
        module = sys.modules["torch"].nn.Module
        local = {
            k: v for k, v in local.items() if isinstance(v, module) or hasattr(v, "param_groups")
        }
        for weight in weights:
            name = next(
                (
                    f"{variable}.{path}"
                    for variable, value in local.items()
                    if isinstance(value, module)
                    for path, parameter in value.named_parameters()
                    if parameter is weight
                ),
                None,
            )
            optimizer = next(
                (
                    variable
                    for variable, value in local.items()
                    if any(
                        weight is parameter
                        for group in getattr(value, "param_groups", ())
                        for parameter in group.get("params", ())
                    )
                ),
                None,
            )
            if name is not None and optimizer is not None:
                return weight, name, optimizer
        return None

    def _step_line(self, seen: CallFailed | Raised, optimizer: str, first: int) -> int | None:
        """The last line before the failing one that calls ``optimizer.step()``, from the
        function's ``first`` line on."""
        statements = seen.info.source.statements
        for line in sorted((n for n in statements if first <= n < seen.line), reverse=True):
            node = statements[line]
            call = getattr(node, "value", None)
            if (
                isinstance(call, ast.Call)
                and isinstance(call.func, ast.Attribute)
                and call.func.attr == "step"
                and isinstance(call.func.value, ast.Name)
                and call.func.value.id == optimizer
            ):
                return line
        return None

    def _name(self, made: Made) -> str | None:
        """The name the statement that made it bound it to (``h = torch.sigmoid(...)``)."""
        statement = self.facts.sources.get(made.file).statements.get(made.line)
        if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
            target = statement.targets[0]
            if isinstance(target, ast.Name):
                return target.id
        return None


def _leaves(tensor: Any) -> list[Any]:
    """The leaf tensors (weights) a backward from ``tensor`` reaches: each
    ``AccumulateGrad`` node's ``variable``."""
    pending = [tensor.grad_fn]
    seen: dict[int, Any] = {}  # held: a node's Python object may be made anew on each access
    leaves: list[Any] = []
    while pending and len(seen) < _MAX_NODES:
        node = pending.pop()
        if node is None or id(node) in seen:
            continue
        seen[id(node)] = node
        variable = getattr(node, "variable", None)
        if variable is not None:
            leaves.append(variable)
        pending.extend(next_node for next_node, _ in getattr(node, "next_functions", ()))
    return leaves


def _word(op: str) -> str:
    """``torch.sigmoid``, ``Sigmoid`` (a module), ``LogSoftmax`` → ``sigmoid``, ``logsoftmax``."""
    return op.rsplit(".", 1)[-1].replace("_", "").lower()
