"""The in-process engine: runs next to the user's code in the child process.

Only the standard library is imported here (torch and numpy are read duck-typed when the
user's code has imported them), so the engine starts fast and works on any interpreter.
"""

import os

ENGINE_PACKAGE = __name__
"""Every module under it is the engine's: its code runs only from the interpreter's callbacks."""
OUR_THREADS = "shapelens-"
"""The names of the threads ShapeLens starts next to user code begin so (none runs it)."""
SHAPELENS_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
"""The ``shapelens`` package's folder: frames of files under it are ShapeLens's own."""
