"""A torch function mode's frames taken out of a traceback, as it would be without the mode
(the op watch's: :mod:`shapelens.engine.findings.op_watch`)."""

from __future__ import annotations

from types import TracebackType


def skip_the_mode(tb: TracebackType | None, hidden: tuple[str, ...]) -> None:
    """Unlink the mode's frames (and torch's code that hands a call to it) from the
    traceback, as it would be without the mode: a notebook shows every frame. A function
    of torch's Python code hands the call over from a frame of its own (``return
    handle_torch_function(cross_entropy, ...)``) and the mode calls it again: only that
    second frame, where it ran, is the program's. In place: on 3.11 the interpreter puts
    back the traceback object it had after a trace event."""
    previous: TracebackType | None = None
    kept = tb
    while kept is not None:
        following = kept.tb_next
        handed_over = False
        while following is not None and following.tb_frame.f_code.co_filename in hidden:
            following = following.tb_next
            handed_over = True
        if (
            handed_over
            and previous is not None
            and following is not None
            and following.tb_frame.f_code is kept.tb_frame.f_code
        ):
            previous.tb_next = following  # the frame that handed the call over
            kept = following
            continue
        kept.tb_next = following
        previous, kept = kept, following
