"""A regular expression compiled when it is first used.

The child imports every rule before the user's code runs, and most rules' patterns (torch's
error wordings, what a shape-only run cannot read, a mask's source text) are only needed
when something fails or warns: compiling them at import cost the child ~4 ms of start-up
on every run. Stdlib only; the compiled pattern is kept once made.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator


class LazyPattern:
    """``re.compile(pattern, flags)``, done on the first search."""

    __slots__ = ("_compiled", "flags", "pattern")

    def __init__(self, pattern: str, flags: int = 0) -> None:
        self.pattern = pattern
        self.flags = flags
        self._compiled: re.Pattern[str] | None = None

    @property
    def compiled(self) -> re.Pattern[str]:
        if self._compiled is None:
            self._compiled = re.compile(self.pattern, self.flags)
        return self._compiled

    def search(self, string: str) -> re.Match[str] | None:
        return self.compiled.search(string)

    def match(self, string: str) -> re.Match[str] | None:
        return self.compiled.match(string)

    def fullmatch(self, string: str) -> re.Match[str] | None:
        return self.compiled.fullmatch(string)

    def finditer(self, string: str) -> Iterator[re.Match[str]]:
        return self.compiled.finditer(string)

    def sub(self, replacement: str | Callable[[re.Match[str]], str], string: str) -> str:
        return self.compiled.sub(replacement, string)

    def __repr__(self) -> str:
        return f"LazyPattern({self.pattern!r}, {self.flags!r})"
