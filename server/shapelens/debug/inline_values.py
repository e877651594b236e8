"""Tensor-aware inline values for any debugpy session.

The editor evaluates :data:`EXPRESSION` through DAP ``evaluate`` in the paused frame. It is
self-contained (the debuggee needs neither shapelens nor anything we ship): it compiles a
small function into a fresh namespace and applies it to ``locals()``. The function reads
metadata only — ``shape``, ``dtype``, ``device``, ``requires_grad`` — never ``repr`` of a
tensor, never its data, so it neither copies nor synchronises a GPU. Output: one line per
tensor-like local (container entries flattened one level, at most 8 each),
``name<TAB>label`` with the same label format as the hints: ``pred (4,1) f32 cpu grad``.
"""

from __future__ import annotations

import inspect

from shapelens.present.shapes import DTYPE_ABBREVIATIONS, joined_dims, shape_text

# The shape is written by the very function the hints use: its source travels in the helper.
_PRESENT_SOURCE = (
    "from __future__ import annotations\n"
    + inspect.getsource(shape_text)
    + inspect.getsource(joined_dims)
    + f"\nDTYPE_ABBREVIATIONS = {DTYPE_ABBREVIATIONS!r}\n"
)

HELPER_SOURCE = (
    _PRESENT_SOURCE
    + """
def describe(scope):
    short = DTYPE_ABBREVIATIONS

    def tensor_like(value):
        kind = type(value)
        return hasattr(kind, "shape") and hasattr(kind, "dtype")

    def label(value):
        try:
            dims = shape_text(tuple(int(d) for d in value.shape))
        except Exception:
            dims = "(?)"
        dtype = str(value.dtype)
        dtype = dtype[6:] if dtype.startswith("torch.") else dtype
        parts = [dims, short.get(dtype, dtype)]
        device = getattr(value, "device", None)
        if device is not None:
            parts.append(str(device))
        if getattr(value, "requires_grad", False) is True:
            parts.append("grad")
        return " ".join(parts)

    out = []
    for name, value in list(scope.items()):
        if name.startswith("__"):
            continue
        try:
            if tensor_like(value):
                out.append(name + "\\t" + label(value))
            elif type(value) in (list, tuple):
                for index, item in enumerate(value[:8]):
                    if tensor_like(item):
                        out.append("%s[%d]\\t%s" % (name, index, label(item)))
            elif isinstance(value, dict):
                for count, (key, item) in enumerate(dict.items(value)):
                    if count >= 8:
                        break
                    if isinstance(key, (str, int)) and tensor_like(item):
                        out.append("%s[%r]\\t%s" % (name, key, label(item)))
        except Exception:
            continue
    return "\\n".join(out)
"""
)

EXPRESSION = (
    "(lambda namespace: (exec(compile("
    + repr(HELPER_SOURCE)
    + ", '<shapelens-inline>', 'exec'), namespace), namespace['describe'])[1])({})(locals())"
)


def parse(result: str) -> dict[str, str]:
    """Parse the evaluated result (the DAP ``result`` is the ``repr`` of the string)."""
    text = result
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        import ast

        try:
            text = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            return {}
    pairs = (line.split("\t", 1) for line in text.splitlines() if "\t" in line)
    return {name: label for name, label in pairs}
