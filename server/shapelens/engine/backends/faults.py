"""An error of ours inside a tracing callback, kept out of the program.

A backend's callbacks run in the program's own threads, inside its frames: what they raise,
the program would get as if its own line had raised (a dictionary another thread resized
once ended a user's worker thread this way). So each callback catches what it raises (a
``try`` costs nothing until something raises, 3.11+) and hands it here; the backend stops
tracing, the program runs on untraced, and the run says where tracing stopped and why
(``tracing.stopped`` in the trace). ``KeyboardInterrupt`` and other ``BaseException``\\ s
are the program's (a Ctrl-C that lands inside a callback): never caught.
"""

from __future__ import annotations

import os
import traceback
from types import FrameType

from shapelens.engine import SHAPELENS_DIR


def fault_text(exc: Exception, frame: FrameType | None) -> str:
    """``exc``, where in our code it was raised, and the program's line being traced."""
    ours = [
        entry
        for entry in traceback.extract_tb(exc.__traceback__)
        if entry.filename.startswith(SHAPELENS_DIR + os.sep)
    ]
    text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    if ours:
        inner = ours[-1]
        text += f" (shapelens/{os.path.relpath(inner.filename, SHAPELENS_DIR)}:{inner.lineno})"
    if frame is not None:
        text += f", tracing {os.path.basename(frame.f_code.co_filename)}:{frame.f_lineno}"
    return text
