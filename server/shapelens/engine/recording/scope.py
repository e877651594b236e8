"""Which code is the user's own: the only code the tracer looks at."""

from __future__ import annotations

import fnmatch
import os
import sys
import sysconfig
import traceback
from dataclasses import dataclass, field
from types import CodeType

from shapelens.engine import SHAPELENS_DIR

INLINE_CODE_NAMES = frozenset({"<listcomp>", "<dictcomp>", "<setcomp>", "<genexpr>", "<lambda>"})
"""Code that runs as part of the statement that makes or consumes it, in a frame of its own
(3.12 inlines the comprehensions, not the others): never traced on its own."""
_PACKAGE_DIR = SHAPELENS_DIR


@dataclass(frozen=True, kw_only=True)
class ScopeConfig:
    root: str
    """Files under this directory are user code by default (the run's cwd)."""
    always: tuple[str, ...] = ()
    """Files that are user code whatever the globs say (the script itself)."""
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    functions: tuple[str, ...] = ()
    """When given, only these functions are traced (``myfunc``, ``Block.forward``)."""
    cell_files: tuple[str, ...] = ()
    """Name patterns of notebook cells (``/tmp/ipykernel_42/*``, ``<ipython-input-*``): a
    kernel compiles each cell under such a name, and cells are user code."""


def _library_dirs() -> tuple[str, ...]:
    dirs = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix, _PACKAGE_DIR}
    for name in ("stdlib", "platstdlib", "purelib", "platlib"):
        path = sysconfig.get_paths().get(name)
        if path:
            dirs.add(path)
    return tuple(sorted(os.path.join(os.path.realpath(d), "") for d in dirs if d))


def _inside_virtualenv(path: str, root: str) -> bool:
    """A virtualenv (``pyvenv.cfg``) or site-packages between the file and the root."""
    parts = path.split(os.sep)
    if "site-packages" in parts or "dist-packages" in parts or "node_modules" in parts:
        return True
    directory = os.path.dirname(path)
    while directory.startswith(root) and len(directory) > len(root):
        if os.path.exists(os.path.join(directory, "pyvenv.cfg")):
            return True
        directory = os.path.dirname(directory)
    return False


@dataclass
class UserCodeScope:
    config: ScopeConfig
    _file_cache: dict[str, str | None] = field(default_factory=dict)
    _real_folders: dict[str, str] = field(default_factory=dict)
    _library: tuple[str, ...] = field(default_factory=_library_dirs)

    def __post_init__(self) -> None:
        root = os.path.realpath(self.config.root)
        self._root = os.path.join(root, "")
        self._always = {os.path.realpath(p) for p in self.config.always}

    def user_file(self, filename: str) -> str | None:
        """The absolute path if ``filename`` is user code, else ``None`` (cached)."""
        try:
            return self._file_cache[filename]
        except KeyError:
            pass
        result = self._judge(filename)
        self._file_cache[filename] = result
        return result

    def _judge(self, filename: str) -> str | None:
        if any(fnmatch.fnmatchcase(filename, p) for p in self.config.cell_files):
            return filename  # the name the kernel gave the cell: its lines' file
        if not filename or filename.startswith("<"):
            return None
        path = self._resolved(filename)
        if path in self._always:
            return path
        if self.config.exclude or self.config.include:
            relative = os.path.relpath(path, self._root)
            if any(_glob(path, relative, g) for g in self.config.exclude):
                return None
            if any(_glob(path, relative, g) for g in self.config.include):
                return path
        if not path.startswith(self._root):
            return None
        library = any(path.startswith(d) for d in self._library if not self._root.startswith(d))
        if library or _inside_virtualenv(path, self._root.rstrip(os.sep)):
            return None
        return path

    def _resolved(self, filename: str) -> str:
        """``os.path.realpath`` of ``filename``, its folder's resolved once: every library
        file a program runs is judged when its code first starts, and realpath walks each
        folder up to the root (24 of 37 µs a file, 2,000 of torch's files)."""
        folder, name = os.path.split(os.path.abspath(filename))
        real = self._real_folders.get(folder)
        if real is None:
            real = self._real_folders[folder] = os.path.realpath(folder)
        path = os.path.join(real, name)
        return os.path.realpath(path) if os.path.islink(path) else path

    def raised_at(self, error: BaseException) -> tuple[str | None, int | None]:
        """The innermost line of user code that ``error`` passed through, if any."""
        found: tuple[str | None, int | None] = (None, None)
        for frame, lineno in traceback.walk_tb(error.__traceback__):
            user = self.user_file(frame.f_code.co_filename)
            if user is not None:
                found = (user, lineno)
        return found

    def wants_code(self, code: CodeType) -> bool:
        if code.co_name in INLINE_CODE_NAMES:
            return False
        wanted = self.config.functions
        if not wanted:
            return True
        qualname = getattr(code, "co_qualname", code.co_name).replace(".<locals>", "")
        return any(qualname == name or qualname.endswith("." + name) for name in wanted)


def _glob(path: str, relative: str, pattern: str) -> bool:
    return fnmatch.fnmatchcase(path, pattern) or fnmatch.fnmatchcase(relative, pattern)
