"""First code the traced child runs: ``python _bootstrap.py CONFIG_JSON``.

A file rather than ``python -c`` so that debuggers can hide it with the rest of the runner
(its path is under the shapelens package). It imports the child entry point from this
very package, then leaves ``sys.path[0]`` for the child to set as python would.

It runs in whatever interpreter the user chose: until the version is checked, only syntax
every Python has (no f-strings, no annotations).
"""

import os
import sys

MINIMUM = (3, 10)
"""The oldest Python the traced child runs on (``runner/probe.py`` says the same)."""
TOO_OLD_EXIT = 3
"""The exit status of an interpreter older than :data:`MINIMUM`, before it says hello: the
launcher says so in one line."""

if __name__ == "__main__":
    if sys.version_info[:2] < MINIMUM:
        sys.exit(TOO_OLD_EXIT)
    sys.path[0] = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from shapelens.runner.child import main

    sys.path[0] = ""
    main(sys.argv[1])
