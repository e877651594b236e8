"""One rank of a distributed run, as torchrun starts it: ``python rank.py DIR CONFIG_JSON``.

The rank is an ordinary traced child whose channel is a file, ``DIR/rank-<RANK>.frames``
(same frames, same periodic flushes, so a crashed rank leaves what it had), which
``shapelens merge`` or the launcher reads afterwards. The directory may be shared between
nodes (``SHAPELENS_TRACE_DIR``).
"""

import json
import os
import sys

sys.path[0] = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from shapelens.runner.child import ChildConfig, ChildRun  # noqa: E402

sys.path[0] = ""
directory, config_json = sys.argv[1], sys.argv[2]
rank = os.environ.get("RANK", "0")
flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
config = json.loads(config_json)
# A control pipe whose write end we hold: no stop requests, and never an EOF.
control_read, _control_write = os.pipe()
config.update(
    channel_fd=os.open(os.path.join(directory, f"rank-{rank}.frames"), flags, 0o644),
    control_fd=control_read,
    crash_fd=os.open(os.path.join(directory, f"rank-{rank}.crash"), flags, 0o644),
)
ChildRun(ChildConfig.from_json(json.dumps(config))).run()
