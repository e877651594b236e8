"""ShapeLens: per-line tensor metadata (shape, dtype, device, grad) from a traced run.

The public surface is small on purpose:

- ``from shapelens import snoop`` — drop-in for ``torchsnooper.snoop`` (also
  ``TensorFormat``, ``NumpyFormat``, ``register_snoop``);
- :mod:`shapelens.trace` — the trace data model and its JSON file format;
- :func:`shapelens.runner.launcher.run_traced` — run a script or module under the tracer in a child
  process;
- the ``shapelens`` command line (``shapelens run``, ``shapelens lsp``).
"""

from typing import Any

__version__ = "0.1.0"
__all__ = ["NumpyFormat", "TensorFormat", "__version__", "register_snoop", "snoop"]

_SNOOP_NAMES = {"snoop", "TensorFormat", "NumpyFormat", "register_snoop"}


def __getattr__(name: str) -> Any:
    # Imported on first use: `import shapelens` stays light (no pysnooper, no torch).
    if name in _SNOOP_NAMES:
        from shapelens import snooping

        return getattr(snooping, name)
    raise AttributeError(f"module 'shapelens' has no attribute {name!r}")
