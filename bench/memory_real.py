"""A real run of one program on the CPU, counted as a shape-only run counts it: the same
storage-tracking dispatch mode (``shapelens.engine.memory``) on real tensors, and torch's own
``FlopCounterMode`` for the FLOPs. Prints one JSON object; used by memory_accuracy.py.
Usage: python bench/memory_real.py PROGRAM [--no-onednn]
(--no-onednn: with torch.backends.mkldnn off, so the CPU's LSTM keeps no oneDNN workspace)
"""

from __future__ import annotations

import contextlib
import json
import os
import runpy
import sys

import torch
from torch.utils.flop_counter import FlopCounterMode

from shapelens.engine.memory.ledger import MemoryLedger
from shapelens.engine.memory.watch import MemoryWatch
from shapelens.engine.recording.scope import ScopeConfig, UserCodeScope


def main() -> None:
    program = os.path.abspath(sys.argv[1])
    ledger = MemoryLedger()
    watch = MemoryWatch(ledger, UserCodeScope(ScopeConfig(root=os.path.dirname(program))))
    onednn = (
        torch.backends.mkldnn.flags(enabled=False)
        if "--no-onednn" in sys.argv[2:]
        else contextlib.nullcontext()
    )
    with onednn, FlopCounterMode(display=False) as flops:
        watch.start(torch)
        try:
            runpy.run_path(program, run_name="__main__")
        finally:
            watch.stop()
    peak = ledger.peaks["cpu"]
    print(
        json.dumps(
            {"peak": peak.bytes, "breakdown": peak.breakdown, "flops": flops.get_total_flops()}
        )
    )


if __name__ == "__main__":
    main()
