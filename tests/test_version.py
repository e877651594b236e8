"""One version number, from one place: ``shapelens/_version.py`` (``shapelens.__version__``).
pyproject.toml reads it (dynamic), package.json must say the same, every trace names it."""

from __future__ import annotations

import json
import re
import tomllib

import shapelens
from shapelens.trace import Trace
from shapelens.trace.codec import trace_to_json

from conftest import REPO


def test_the_package_is_the_one_place() -> None:
    assert re.fullmatch(r"\d+\.\d+\.\d+", shapelens.__version__)
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    assert "version" not in project["project"]
    assert project["project"]["dynamic"] == ["version"]
    dynamic = project["tool"]["setuptools"]["dynamic"]["version"]
    assert dynamic == {"attr": "shapelens._version.__version__"}


def test_the_extension_has_the_same_version() -> None:
    manifest = json.loads((REPO / "package.json").read_text(encoding="utf-8"))
    assert manifest["version"] == shapelens.__version__, (
        "package.json's version drifted from shapelens.__version__ (server/shapelens/_version.py)"
    )


def test_a_trace_names_its_producer() -> None:
    trace = Trace(argv=("x.py",), python="3.11.7", duration_s=0.1, status="ok", exit_code=0)
    producer = trace_to_json(trace)["producer"]
    assert producer == {"name": "shapelens", "version": shapelens.__version__}
