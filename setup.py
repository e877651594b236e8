"""The one compiled part: the sys.settrace gate, CPython 3.11 only (3.12+ uses
sys.monitoring). Without a C compiler ShapeLens traces as before, slower: the build says so
in a banner (`pip install -v` shows it; `shapelens doctor` says why the gate is off), and
SHAPELENS_REQUIRE_GATE=1 makes that a failed install instead."""

import os
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.errors import CCompilerError, CompileError, ExecError, PlatformError

GATE = Extension(
    "shapelens.engine.backends._library_gate", ["server/shapelens/engine/backends/_library_gate.c"]
)
NO_GATE = """
=====================================================================================
ShapeLens: the C gate (server/shapelens/engine/backends/_library_gate.c) did not build:
  {error}
ShapeLens works without it on this interpreter, slower: plain sys.settrace traces the
whole program. Install a C compiler and the Python headers (Debian: gcc python3-dev)
and reinstall for the gate; `shapelens doctor` shows which tracing core a run uses.
SHAPELENS_REQUIRE_GATE=1 makes this a failed install.
=====================================================================================
"""


class BuildGate(build_ext):
    def build_extension(self, ext: Extension) -> None:
        try:
            super().build_extension(ext)
        except (CCompilerError, CompileError, ExecError, PlatformError, OSError) as err:
            if os.environ.get("SHAPELENS_REQUIRE_GATE") == "1":
                raise
            sys.stderr.write(NO_GATE.format(error=err))


wanted = sys.implementation.name == "cpython" and sys.version_info[:2] == (3, 11)
setup(ext_modules=[GATE] if wanted else [], cmdclass={"build_ext": BuildGate})
