"""Installed the normal way: ``python -m build`` makes an sdist and a wheel that pass
``twine check`` without a deprecation warning, and the wheel, installed into a fresh venv,
runs ``shapelens run`` on the seed example and finds its broadcast: in the 3.11 suite (with
the gate) and in the 3.12 one (``make test`` runs both).

The fresh venv gets torch from the interpreter that already has it (a ``.pth`` line to a
folder of links to torch and what it requires), not a second copy: everything else is
installed by pip from the wheel's own requirements.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from conftest import EXAMPLES, REPO

SOURCES = ("pyproject.toml", "setup.py", "README.md", "LICENSE", "server/shapelens")
"""What the sdist is made of (a copy: the build writes its own files next to them)."""

TORCH_FILES = r"""
import importlib.metadata as metadata, json, re
todo, seen, tops = ["torch"], set(), set()
while todo:
    name = re.sub(r"[-_.]+", "-", todo.pop()).lower()
    if name in seen:
        continue
    seen.add(name)
    try:
        dist = metadata.distribution(name)
    except metadata.PackageNotFoundError:
        continue
    tops |= {str(dist.locate_file(f.parts[0])) for f in dist.files or () if f.parts[0] != ".."}
    todo += [re.match(r"[\w.-]+", r).group() for r in dist.requires or () if "extra" not in r]
print(json.dumps(sorted(tops)))
"""
"""Run by an interpreter with torch: the top-level files of torch and of what it requires."""


def _run(
    *command: str | Path,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    status: int = 0,
) -> str:
    done = subprocess.run(
        [str(part) for part in command],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
        env={**{k: v for k, v in os.environ.items() if k != "PYTHONPATH"}, **(env or {})},
    )
    assert done.returncode == status, f"{command}:\n{done.stdout}\n{done.stderr}"
    return done.stdout + done.stderr


def _venv_with_torch(python: Path, where: Path) -> Path:
    """A fresh venv of ``python``, seeing the torch ``python`` has through a ``.pth`` line."""
    _run(python, "-m", "venv", "--without-pip", where)
    links = where / "torch-links"
    links.mkdir()
    for top in json.loads(_run(python, "-c", TORCH_FILES)):
        (links / Path(top).name).symlink_to(top)
    site = _run(where / "bin" / "python", "-c", "import site; print(site.getsitepackages()[0])")
    (Path(site.strip()) / "torch-links.pth").write_text(f"{links}\n")
    return where / "bin" / "python"


def _source(tmp_path: Path) -> Path:
    source = tmp_path / "source"
    for name in SOURCES:
        copy = shutil.copytree if (REPO / name).is_dir() else shutil.copy
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        copy(REPO / name, source / name)
    for compiled in source.rglob("*.so"):
        compiled.unlink()
    return source


def _build(tmp_path: Path) -> tuple[Path, Path]:
    source = _source(tmp_path)
    dist = tmp_path / "dist"
    log = _run(sys.executable, "-m", "build", "--no-isolation", "--outdir", dist, source)
    assert "Deprecat" not in log and "deprecat" not in log, log
    sdist, wheel = sorted(dist.glob("*.tar.gz")), sorted(dist.glob("*.whl"))
    assert len(sdist) == len(wheel) == 1, log
    checked = _run(sys.executable, "-m", "twine", "check", "--strict", sdist[0], wheel[0])
    assert checked.count("PASSED") == 2, checked
    return sdist[0], wheel[0]


def _installed(python: Path, wheel: Path, tmp_path: Path) -> Path:
    """The ``shapelens`` command of the wheel installed into a fresh venv of ``python``."""
    venv = tmp_path / f"venv-{wheel.name}"
    fresh = _venv_with_torch(python, venv)
    _run(sys.executable, "-m", "pip", "--python", fresh, "install", "-q", wheel)
    where = _run(fresh, "-c", "import shapelens; print(shapelens.__file__)", cwd=tmp_path)
    assert where.startswith(str(venv)), where
    return venv / "bin" / "shapelens"


def _check(shapelens: Path, core: str, tmp_path: Path) -> None:
    """The seed's broadcast found, under the tracing core this interpreter should get."""
    output = _run(shapelens, "run", EXAMPLES / "seed_linear_fit.py", cwd=tmp_path)
    assert BROADCAST in output, output
    report = _run(shapelens, "doctor", cwd=tmp_path)
    assert f"tracing core  {core} (" in report, report


BROADCAST = "⚠ broadcast: `y` (4,) - `pred` (4, 1) → (4, 4)"


ON_311 = sys.implementation.name == "cpython" and sys.version_info[:2] == (3, 11)


@pytest.mark.skipif(
    sys.implementation.name != "cpython" or sys.version_info[:2] not in ((3, 11), (3, 12)),
    reason="checked by the 3.11 suite (the gate) and the 3.12 one (sys.monitoring)",
)
def test_the_wheel_installs_and_finds_the_seed_broadcast(tmp_path: Path) -> None:
    """This interpreter's wheel: CPython 3.11's carries the gate, 3.12's is pure Python."""
    _, wheel = _build(tmp_path)
    listing = _run(sys.executable, "-m", "zipfile", "-l", wheel)
    if ON_311:
        tag = sysconfig.get_config_var("EXT_SUFFIX")  # .cpython-311-x86_64-linux-gnu.so
        assert "-cp311-cp311-" in wheel.name
        assert f"shapelens/engine/backends/_library_gate{tag}" in listing
    else:
        assert wheel.name.endswith("-py3-none-any.whl")
        assert ".so" not in listing
    shapelens = _installed(Path(sys.executable), wheel, tmp_path)
    _check(shapelens, "gate" if ON_311 else "monitoring", tmp_path)


@pytest.mark.skipif(not ON_311, reason="the gate is built on CPython 3.11 only")
def test_a_gate_that_cannot_build_says_so_loudly(tmp_path: Path) -> None:
    """No working C compiler: the install goes on without the gate under a banner (pip
    shows it with -v, `python -m build` always), or fails with SHAPELENS_REQUIRE_GATE=1."""
    source = _source(tmp_path)
    pip_wheel = ("-m", "pip", "wheel", "-v", "--no-deps", "--no-build-isolation", source)
    no_compiler = {"CC": "false"}
    log = _run(sys.executable, *pip_wheel, "-w", tmp_path / "w", env=no_compiler)
    gate = "server/shapelens/engine/backends/_library_gate.c"
    assert f"ShapeLens: the C gate ({gate}) did not build:" in log
    (wheel,) = (tmp_path / "w").glob("*.whl")
    assert ".so" not in _run(sys.executable, "-m", "zipfile", "-l", wheel)
    required = {**no_compiler, "SHAPELENS_REQUIRE_GATE": "1"}
    _run(sys.executable, *pip_wheel, "-w", tmp_path / "w2", env=required, status=1)
