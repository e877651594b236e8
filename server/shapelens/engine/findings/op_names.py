"""How a torch function is called in the user's code: ``torch.dot``, ``Tensor.mean``,
``F.cross_entropy``, ``torch.linalg.inv``, ``@``."""

from __future__ import annotations

import ast
from typing import Any

from shapelens.engine.torch_support import torch_compat

OPERATOR_OF = {
    "matmul": ast.MatMult, "__matmul__": ast.MatMult, "__rmatmul__": ast.MatMult,
    "add": ast.Add, "__add__": ast.Add, "__radd__": ast.Add,
    "sub": ast.Sub, "__sub__": ast.Sub, "__rsub__": ast.Sub,
    "mul": ast.Mult, "__mul__": ast.Mult, "__rmul__": ast.Mult,
    "div": ast.Div, "__truediv__": ast.Div, "__rtruediv__": ast.Div,
}  # fmt: skip

_SYMBOL = {ast.MatMult: "@", ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/"}


def name_of(func: Any) -> str:
    return str(getattr(func, "__name__", "") or type(func).__name__)


def op_label(func: Any) -> str:
    """``torch.dot``, ``Tensor.mean``, ``F.cross_entropy``, ``@`` as the user wrote it."""
    name = name_of(func)
    owner = getattr(func, "__self__", None)
    if name == "__get__" and hasattr(owner, "__objclass__"):  # a property: ``x.T``
        return f"Tensor.{name_of(owner)}"
    operator = OPERATOR_OF.get(name)
    module = str(getattr(func, "__module__", None) or "")
    qualname = str(getattr(func, "__qualname__", name))
    if operator is not None and (name.startswith("__") or "Tensor" in qualname):
        return _SYMBOL[operator] if name.startswith("__") else f"Tensor.{name}"
    if qualname.startswith(("TensorBase.", "Tensor.")):
        return f"Tensor.{name}"
    namespace = torch_compat.PUBLIC_NAMESPACE_OF.get(module)
    if namespace is not None:  # linalg_inv is torch.linalg.inv
        return f"{namespace}.{name.removeprefix(namespace.rpartition('.')[2] + '_')}"
    return f"torch.{name}"
