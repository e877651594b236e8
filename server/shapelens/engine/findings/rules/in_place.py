"""``op_error``: a backward that fails because a tensor it needs was changed in place after
the op that made it saved it for its backward ("one of the variables needed for gradient
computation has been modified by an inplace operation: [torch.FloatTensor [32, 64]], which
is output 0 of Sigmoid").

torch's message names the tensor's shape and the op that made it, never the line that
changed it, and the failing call (``loss.backward()``) names neither. The op watch saw both
calls (the fault is in the code: the first backward fails, and the first hits are watched),
and the provenance kept where each result was made and first changed in place
(:meth:`~shapelens.engine.findings.provenance.Provenance.record`). The finding names that
tensor, the line that made it and the line that changed it.
"""

from __future__ import annotations

import ast
import re

from shapelens.engine.findings.context import RunFacts
from shapelens.engine.findings.events import CallFailed, Raised
from shapelens.engine.findings.op_names import op_label
from shapelens.engine.findings.provenance import Made
from shapelens.engine.torch_support import torch_errors
from shapelens.trace.finding import CauseStep, Finding, Operand

_BACKWARD = re.compile(r"Backward\d*$")
_MADE_BY = {"addmm": ("linear",), "mm": ("linear", "matmul"), "bmm": ("matmul",)}
"""The autograd node that made a tensor → the calls (as the op watch labels them) that
make it under another name: a ``Linear``'s output is ``addmm``'s."""


class ExplainInPlace:
    """The in-place change behind a backward's "modified by an inplace operation"."""

    def __init__(self, facts: RunFacts) -> None:
        self.facts = facts

    def explain(self, seen: CallFailed | Raised) -> list[Finding]:
        text = str(seen.exc).strip()
        found = torch_errors.SAVED_TENSOR_CHANGED_ERROR.search(text)
        if found is None:
            return []
        shape = tuple(int(size) for size in found["shape"].split(",") if size.strip())
        maker = _word(_BACKWARD.sub("", found["node"]))
        provenance = (seen.provenance if isinstance(seen, CallFailed) else None) or (
            self.facts.provenance
        )
        makers = {maker, *_MADE_BY.get(maker, ())}
        chosen = [m for m in provenance.changed_in_place(shape) if _word(m.op) in makers]
        if not chosen:
            return []  # not a change a watched call made (an optimizer's step on a weight)
        made = chosen[-1]  # the latest: the forward that this backward runs through
        assert made.changed is not None
        file, line, expression, op = made.changed
        subject = self._name(made) or "the tensor"
        shape_, dtype, device = made.meta
        info = seen.info
        call = op_label(seen.failed.func) if isinstance(seen, CallFailed) else None
        return [
            Finding(
                kind="op_error",
                severity="error",
                file=info.file,
                line=seen.line,
                expression=info.source.statement_text(seen.line) or None,
                operands=(
                    Operand(
                        name=subject,
                        shape=shape_,
                        dtype=dtype,
                        device=device,
                        file=made.file,
                        line=made.line,
                        odd=True,
                    ),
                ),
                error=text.splitlines()[0],
                op=call,
                advice=(
                    f"{made.op} saved `{subject}` for its backward: change a copy "
                    f"(`{subject} = {subject}.clone()` first) or use an op that is not in place"
                ),
                chain=(  # where it was made is its birth: the change alone is the chain
                    CauseStep(
                        file=file,
                        line=line,
                        expression=expression,
                        subject=subject,
                        note=f"changed in place by `{expression or op}` ({op}) after {made.op} "
                        "saved it for its backward",
                    ),
                ),
            )
        ]

    def _name(self, made: Made) -> str | None:
        """The name the statement that made it bound it to (``h = torch.sigmoid(...)``)."""
        statement = self.facts.sources.get(made.file).statements.get(made.line)
        if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
            target = statement.targets[0]
            if isinstance(target, ast.Name):
                return target.id
        return None


def _word(op: str) -> str:
    """``torch.sigmoid``, ``Sigmoid`` (a module), ``LogSoftmax`` → ``sigmoid``, ``logsoftmax``."""
    return op.rsplit(".", 1)[-1].replace("_", "").lower()
