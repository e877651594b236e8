"""A thread's stack through user code: where a rank waits or was when it died."""

from __future__ import annotations

import sys
from collections.abc import Callable
from types import FrameType
from typing import Any

MAX_FRAMES = 12
"""User frames listed, innermost first."""
_BLOCKING = (
    (("torch", "autograd"), "backward"),
    (("torch", "distributed"), None),
    (("torch", "nn", "parallel"), None),
)
"""Where a rank's main thread blocks on the other ranks without a collective call of its
own: DDP all-reduces gradients inside ``backward`` (in C++, under torch.autograd's Python
frame), and torch.distributed's own Python code (a store, a device mesh) waits too."""


class UserStacks:
    """Reads stacks through the frames ``user_file`` accepts (files under the project that
    are not ShapeLens's own)."""

    def __init__(self, user_file: Callable[[str], str | None], ours: str) -> None:
        self._user_file = user_file
        self._ours = ours

    def is_user_frame(self, frame: FrameType) -> bool:
        path = self._user_file(frame.f_code.co_filename)
        return path is not None and not path.startswith(self._ours)

    def from_frame(self, frame: FrameType | None) -> list[list[Any]]:
        """[file, line, function] of each user frame from ``frame`` outwards."""
        found: list[list[Any]] = []
        while frame is not None and len(found) < MAX_FRAMES:
            path = self._user_file(frame.f_code.co_filename)
            if path is not None and not path.startswith(self._ours):
                found.append([path, frame.f_lineno, frame.f_code.co_name])
            frame = frame.f_back
        return found

    def of_thread(self, ident: int) -> list[list[Any]]:
        """The user stack of another thread now (the main thread, read by the flusher)."""
        frame = sys._current_frames().get(ident)
        return self.from_frame(frame)

    def blocked_in(self, ident: int) -> tuple[str, tuple[str, int]] | None:
        """Where ``ident`` is when its innermost Python frame is torch code that may wait on
        the other ranks (``backward``: DDP's gradient all-reduce): its name, and the frame
        (to tell it stayed there); None elsewhere."""
        frame = sys._current_frames().get(ident)
        if frame is None:
            return None
        parts = frame.f_code.co_filename.replace("\\", "/").split("/")
        for prefix, name in _BLOCKING:
            for index in range(len(parts) - len(prefix)):
                if tuple(parts[index : index + len(prefix)]) == prefix:
                    label = name or frame.f_code.co_name
                    return label, (frame.f_code.co_filename, frame.f_lineno)
        return None
