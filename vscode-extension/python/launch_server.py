"""Starts the ShapeLens language server from the libraries bundled into the extension.

The user's interpreter only needs what their own code imports (torch): pygls, lsprotocol
and the shapelens package come from ``bundled/libs`` next to this file. The path is put on
``sys.path`` here rather than in PYTHONPATH, so the traced child process and anything it
starts never see it.
"""

import os
import sys

LIBS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bundled", "libs")
if os.path.isdir(LIBS):
    sys.path.insert(0, LIBS)

from shapelens.cli.main import main  # noqa: E402

sys.exit(main(["lsp"]))
