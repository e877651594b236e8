"""ShapeLens: per-line tensor metadata (shape, dtype, device, grad) from a traced run.

The public surface is small on purpose:

- ``from shapelens import snoop`` — drop-in for ``torchsnooper.snoop`` (also
  ``TensorFormat``, ``NumpyFormat``, ``register_snoop``);
- :mod:`shapelens.trace` — the trace data model and its JSON file format;
- :func:`shapelens.runner.launcher.run_traced` — run a script or module under the tracer in a child
  process;
- the ``shapelens`` command line (``shapelens run``, ``shapelens lsp``);
- ``%load_ext shapelens`` in IPython and Jupyter kernels (:mod:`shapelens.notebook`).
"""

from typing import Any

from shapelens._version import __version__

__all__ = [
    "NumpyFormat",
    "TensorFormat",
    "__version__",
    "load_ipython_extension",
    "register_snoop",
    "snoop",
    "unload_ipython_extension",
]

_SNOOP_NAMES = {"snoop", "TensorFormat", "NumpyFormat", "register_snoop"}


def __getattr__(name: str) -> Any:
    # Imported on first use: `import shapelens` stays light (no pysnooper, no torch).
    if name in _SNOOP_NAMES:
        from shapelens import snooping

        return getattr(snooping, name)
    raise AttributeError(f"module 'shapelens' has no attribute {name!r}")


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext shapelens``: trace every cell this kernel runs from now on."""
    from shapelens.notebook.ipython import load  # IPython only where it is loaded

    load(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    """``%unload_ext shapelens``: stop tracing cells."""
    from shapelens.notebook.ipython import unload

    unload(ipython)
