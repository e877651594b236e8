"""The one compiled part: the sys.settrace gate, CPython 3.11 only (3.12+ uses
sys.monitoring). Optional: without a C compiler ShapeLens traces as before, slower."""

import sys

from setuptools import Extension, setup

GATE = Extension(
    "shapelens.engine._library_gate",
    ["server/shapelens/engine/_library_gate.c"],
    optional=True,
)

wanted = sys.implementation.name == "cpython" and sys.version_info[:2] == (3, 11)
setup(ext_modules=[GATE] if wanted else [])
