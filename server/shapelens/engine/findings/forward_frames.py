"""torch's module-call frames, read: which module a ``forward`` frame runs and what it was
given, and the helper frame a hooked call puts between. The op watch walks these frames on
every watched call made inside a module; a replay and a failed call's explanation read
them too."""

from __future__ import annotations

import os
from types import CodeType, FrameType
from typing import Any, NamedTuple

from shapelens.engine.torch_support import torch_compat

_VARARGS, _VARKEYWORDS = 0x04, 0x08


class ModuleCall(NamedTuple):
    """A module a failing call was made in, and what its forward was given."""

    module: Any
    args: tuple[Any, ...]
    kwargs: dict[str, Any]


_MODULE_FILE = os.path.join(*torch_compat.MODULE_FILE)


def is_call_helper(code: CodeType) -> bool:
    """torch's ``inner()`` between ``_call_impl`` and ``forward`` in a hooked module call."""
    return code.co_name == torch_compat.MODULE_CALL_HELPER and code.co_filename.endswith(
        _MODULE_FILE
    )


def is_torch_module(module: Any) -> bool:
    """One of torch.nn's own modules (``nn.Softmax``, ``nn.MSELoss``), not a user's."""
    return str(getattr(type(module), "__module__", "")).startswith("torch.nn.modules")


def module_of(forward: FrameType) -> Any:
    """The module a forward frame runs (its first argument), without gathering the call's
    arguments (:func:`forward_call`): a walk asks for it on every watched call made inside a
    module."""
    code = forward.f_code
    if not (code.co_argcount or code.co_kwonlyargcount):
        return None
    return forward.f_locals.get(code.co_varnames[0])


def forward_call(forward: FrameType) -> ModuleCall:
    """The module a forward frame runs, and what it was given: its positional arguments and
    its parameters by name (with what ``*args`` and ``**kwargs`` took: transformers wraps its
    models' forwards in ``wrapper(self, *args, **kwargs)``)."""
    code = forward.f_code
    local = forward.f_locals
    count = code.co_argcount + code.co_kwonlyargcount
    names = code.co_varnames[:count]
    module = module_of(forward)
    args = tuple(local[name] for name in code.co_varnames[1 : code.co_argcount] if name in local)
    kwargs = {name: local[name] for name in names[1:] if name in local}
    extra = count
    if code.co_flags & _VARARGS:
        varargs = local.get(code.co_varnames[extra])
        args += tuple(varargs) if isinstance(varargs, tuple) else ()
        extra += 1
    if code.co_flags & _VARKEYWORDS:
        varkw = local.get(code.co_varnames[extra])
        kwargs.update(varkw if isinstance(varkw, dict) else {})
    return ModuleCall(module, args, kwargs)
