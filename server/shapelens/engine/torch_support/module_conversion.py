"""``Module._apply`` (behind ``.to()``, ``.cuda()``, ``.half()``) in a shape-only run: fake
parameters are replaced, once each, so a weight two modules share stays shared."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from shapelens.engine.torch_support import torch_compat


class _Conversion:
    """The tensors one ``Module._apply`` replaced so far (a model's whole tree: ``.to()``
    recurses through its children), by the id of the tensor each replaced (kept alive with
    it, so the id stays its own): a tied weight is one Parameter in two modules, and
    stays one."""

    replaced: dict[int, tuple[Any, Any]] | None = None


def apply_by_replacing(module: Any, fn: Callable[[Any], Any], recurse: bool = True) -> Any:
    """``Module._apply`` (behind ``.to()``, ``.cuda()``, ``.half()``) for fake parameters:
    torch swaps a fake parameter in place, which its weak references forbid, so each one is
    replaced by a new Parameter (torch's own "overwrite on conversion" behaviour), once:
    where two modules share one (a language model's head tied to its embedding), both get
    the same replacement, as an in-place swap keeps them tied."""
    outermost = _Conversion.replaced is None
    if outermost:
        _Conversion.replaced = {}
    try:
        if recurse:
            for child in module.children():
                torch_compat.apply_to(child, fn)
        _replace_each(torch_compat.own_parameters(module), fn, parameter=True)
        _replace_each(torch_compat.own_buffers(module), fn, parameter=False)
    finally:
        if outermost:
            _Conversion.replaced = None
    return module


def _replace_each(table: dict[str, Any], fn: Callable[[Any], Any], *, parameter: bool) -> None:
    import torch

    replaced = _Conversion.replaced if _Conversion.replaced is not None else {}
    for key, old in table.items():
        if old is None:
            continue
        done = replaced.get(id(old))
        if done is None:
            if parameter:
                with torch.no_grad():
                    new = torch.nn.Parameter(fn(old), requires_grad=old.requires_grad)
                    if old.grad is not None:
                        new.grad = fn(old.grad)
            else:
                new = fn(old)
            done = replaced[id(old)] = (old, new)
        table[key] = done[1]
