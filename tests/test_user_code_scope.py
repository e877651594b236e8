"""Which files are the user's: judged at their real paths, symlinks resolved, as the run's
hints name them (``UserCodeScope`` resolves each folder once: every library file a program
runs is judged when its code first starts)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from shapelens.engine.recording.scope import ScopeConfig, UserCodeScope


def _project(tmp_path: Path) -> tuple[Path, Path]:
    root = tmp_path / "project"
    outside = tmp_path / "elsewhere"
    (root / "real").mkdir(parents=True)
    outside.mkdir()
    (root / "real" / "helper.py").write_text("x = 1\n")
    (outside / "lib.py").write_text("y = 2\n")
    (root / "linked").symlink_to(root / "real", target_is_directory=True)
    (root / "lib.py").symlink_to(outside / "lib.py")
    (root / "away").symlink_to(outside, target_is_directory=True)
    return root, outside


def test_a_file_reached_through_a_linked_folder_is_user_code_at_its_real_path(
    tmp_path: Path,
) -> None:
    root, _ = _project(tmp_path)
    scope = UserCodeScope(ScopeConfig(root=str(root)))
    real = str((root / "real" / "helper.py").resolve())
    assert scope.user_file(str(root / "linked" / "helper.py")) == real
    assert scope.user_file(str(root / "real" / "helper.py")) == real
    assert scope.user_file(str(root / "linked" / ".." / "real" / "helper.py")) == real


def test_a_link_out_of_the_project_is_not_user_code(tmp_path: Path) -> None:
    root, outside = _project(tmp_path)
    scope = UserCodeScope(ScopeConfig(root=str(root)))
    assert scope.user_file(str(root / "lib.py")) is None  # the file is a link
    assert scope.user_file(str(root / "away" / "lib.py")) is None  # its folder is
    # Included by name, it is judged at its real path, as the hints name it.
    included = UserCodeScope(ScopeConfig(root=str(root), include=(str(outside / "*.py"),)))
    assert included.user_file(str(root / "lib.py")) == str((outside / "lib.py").resolve())


def test_a_relative_name_is_judged_from_the_working_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, _ = _project(tmp_path)
    monkeypatch.chdir(root)
    scope = UserCodeScope(ScopeConfig(root=str(root)))
    assert scope.user_file(os.path.join("linked", "helper.py")) == str(
        (root / "real" / "helper.py").resolve()
    )
    assert scope.user_file("<string>") is None
