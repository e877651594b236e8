"""Who is told when a read sees something new, and what a variation sets off.

A read is news when a value's shape, dtype, device or type was not seen on its line before
(the module tree wakes). It is a variation when that value had been read before: a batch
that varied (the last, smaller one) passes through every line of the model once, at hits
the sampled reads would skip, so every line reads its next hit, and a backend that switched
lines off switches them on (``on_news(..., varied=True)``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from shapelens.engine.recording.code_info import CodeInfo


class News:
    def __init__(self) -> None:
        self._listeners: list[Callable[[], None]] = []
        self._variation_listeners: list[Callable[[], None]] = []

    def on_news(self, listener: Callable[[], None], *, varied: bool = False) -> None:
        """Call ``listener()`` on news, or only on a variation (``varied``)."""
        (self._variation_listeners if varied else self._listeners).append(listener)

    def seen(self, codes: Iterable[CodeInfo | None], *, varied: bool) -> None:
        """A read saw news (``varied``: a variation); ``codes``: every code object known."""
        if varied:
            # A snapshot: another thread may register a code object meanwhile (taken in C,
            # under the GIL; iterating the live dict's view raised in the user's thread).
            for code in tuple(codes):
                if code is not None:
                    code.read_at.clear()  # each line reads its next hit
            for listener in self._variation_listeners:
                listener()
        for listener in self._listeners:
            listener()
