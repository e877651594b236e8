"""ShapeLens: per-line tensor metadata (shape, dtype, device, grad) from a traced run.

The public surface is small on purpose:

- :mod:`shapelens.trace` — the trace data model and its JSON file format;
- :func:`shapelens.runner.run_traced` — run a script or module under the tracer in a child process;
- the ``shapelens`` command line (``shapelens run``).
"""

__version__ = "0.1.0"
__all__ = ["__version__"]
