"""One rank of a distributed run, as torchrun starts it:
``python rank.py TRACE_DIR RUN_ID CONTROL_DIR CONFIG_JSON``.

The process torchrun starts is the rank's warden (``warden.py``): it forks the traced rank
and records how it ended. The rank is an ordinary traced child whose channel is a file,
``TRACE_DIR/shapelens-<RUN_ID>-node<N>-rank<R>.frames`` (N: torchrun's node rank, R: the
global rank; same frames, same periodic flushes, so a crashed rank leaves what it had), which
``shapelens merge`` or the launcher reads afterwards. The directory may be shared between
nodes (``SHAPELENS_TRACE_DIR``). Its control channel is the launcher's FIFO
``CONTROL_DIR/control-<LOCAL_RANK>`` (see distributed.py); the files it leaves there
(``stopped-``, ``waiting-``, ``ended-<LOCAL_RANK>``) answer it.
"""

import contextlib
import os
import sys

sys.path[0] = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
directory, run_id, control_dir, config_json = sys.argv[1:5]
local_rank = os.environ.get("LOCAL_RANK", "0")
node, rank = os.environ.get("GROUP_RANK", "0"), os.environ.get("RANK", "0")
stem = os.path.join(directory, f"shapelens-{run_id}-node{node}-rank{rank}")
with open(stem + ".exit", "w"):  # emptied: a reused stem's old ending is not this one's
    pass
rank_pid = os.fork()
if rank_pid:
    from shapelens.runner.warden import watch

    watch(rank_pid, stem, control_dir, local_rank)
# The rank leads its own process group: torchrun signals the warden's group (killpg), and the
# warden passes each signal on once, to the rank and the workers it forks.
os.setpgid(0, 0)

from shapelens.runner.child import ChildRun, RankHooks  # noqa: E402
from shapelens.runner.contract import ChildConfig  # noqa: E402

sys.path[0] = ""
fifo = os.path.join(control_dir, f"control-{local_rank}")
try:
    # Non-blocking: opening a FIFO for reading waits for a writer otherwise.
    control = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
except OSError:
    # The launcher stopped the run (or is gone): a worker torchrun restarts must not run.
    sys.exit("shapelens: the run was stopped")
os.set_blocking(control, True)
flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
config = ChildConfig.from_json(config_json).with_fds(
    channel=os.open(stem + ".frames", flags, 0o644),
    control=control,
    crash=os.open(stem + ".crash", flags, 0o644),
)


def acknowledge_stop() -> None:
    """Tell the launcher this rank's results are written: only then may ranks end (one that
    ends first makes torchrun SIGTERM the others, maybe before their last flush)."""
    os.close(os.open(os.path.join(control_dir, f"stopped-{local_rank}"), os.O_CREAT, 0o600))


def report_waiting(since: float | None) -> None:
    """``waiting-<LOCAL_RANK>`` holds when the collective this rank waits in began."""
    path = os.path.join(control_dir, f"waiting-{local_rank}")
    if since is None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        return
    partial = path + ".partial"
    with open(partial, "w") as record:
        record.write(repr(since))
    os.replace(partial, path)  # whole or absent: the launcher never reads half of it


ChildRun(config, RankHooks(on_stopped=acknowledge_stop, on_waiting=report_waiting)).run()
