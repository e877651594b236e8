"""The warden of a rank: the process torchrun starts, which forks the traced rank and waits.

A rank killed outright (SIGKILL by the OOM killer or a scheduler, SIGABRT from gloo's C++
when a collective's sizes disagree) can write nothing itself. Its warden sees how it ended
(``waitpid``), writes that beside the rank's trace (``<stem>.exit``: ``signal SIGKILL`` or
``exit 1``), tells the launcher (``ended-<LOCAL_RANK>`` in its private folder), and ends the
same way, so torchrun sees the rank's own status. The rank leads its own process group:
torchrun signals the warden's group (SIGTERM when another rank failed, SIGINT on Ctrl-C),
and the warden passes each signal on once, to the rank's group. Standard library only:
nothing of ShapeLens or torch is loaded before the fork.
"""

from __future__ import annotations

import contextlib
import os
import signal
from typing import NoReturn

FORWARDED = (
    signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2,
)  # fmt: skip


def exit_text(status: int) -> str:
    """``signal SIGKILL`` or ``exit 1``: what ``<stem>.exit`` holds."""
    code = os.waitstatus_to_exitcode(status)
    if code < 0:
        try:
            return f"signal {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    return f"exit {code}"


def watch(pid: int, stem: str, control_dir: str, local_rank: str) -> NoReturn:
    """Wait for the rank ``pid``; record how it ended; end the same way."""

    def forward(signum: int, _frame: object) -> None:
        try:
            os.killpg(pid, signum)  # the rank and the workers it forked, as torchrun would
        except ProcessLookupError:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signum)

    with contextlib.suppress(OSError):  # the rank's own group (it makes it too: no race)
        os.setpgid(pid, pid)
    for signum in FORWARDED:
        signal.signal(signum, forward)
    while True:
        try:
            _, status = os.waitpid(pid, 0)
            break
        except ChildProcessError:  # reaped already: nothing more to learn
            status = 0
            break
    with contextlib.suppress(OSError), open(stem + ".exit", "w") as record:
        record.write(exit_text(status) + "\n")
    with contextlib.suppress(OSError):
        os.close(os.open(os.path.join(control_dir, f"ended-{local_rank}"), os.O_CREAT, 0o600))
    code = os.waitstatus_to_exitcode(status)
    if code < 0:  # die of the same signal (SIGKILL and SIGSTOP keep their default anyway)
        with contextlib.suppress(OSError, ValueError):
            signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    os._exit(code & 0xFF)
