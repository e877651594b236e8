"""Debugger integration: tensors shown by shape in any debugpy session ShapeLens starts (a
pydevd plugin), and the inline-value helper evaluated through DAP."""

import os

PYDEVD_PLUGIN_ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "pydevd_root")
"""The folder pydevd must find on ``sys.path`` to load ShapeLens's plugin."""
