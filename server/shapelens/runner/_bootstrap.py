"""First code the traced child runs: ``python _bootstrap.py CONFIG_JSON``.

A file rather than ``python -c`` so that debuggers can hide it with the rest of the runner
(its path is under the shapelens package). It imports the child entry point from this
very package, then leaves ``sys.path[0]`` for the child to set as python would.
"""

import os
import sys

sys.path[0] = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from shapelens.runner.child import main  # noqa: E402

sys.path[0] = ""
main(sys.argv[1])
