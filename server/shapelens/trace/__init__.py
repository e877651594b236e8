"""The trace: what a traced run produced, and its versioned JSON file format.

The names below load on first use, so the traced child, which needs only
:mod:`shapelens.trace.messages`, does not pay for the data model and codec at start-up.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from shapelens.trace.codec import (
        SCHEMA_ID,
        load_trace,
        trace_from_json,
        trace_to_json,
        write_trace,
    )
    from shapelens.trace.model import (
        ExceptionInfo,
        Finding,
        RelatedLocation,
        RunStatus,
        Trace,
        TracedLine,
        TracedVar,
    )

_HOME = {
    **dict.fromkeys(
        ("SCHEMA_ID", "load_trace", "trace_from_json", "trace_to_json", "write_trace"), "codec"
    ),
    **dict.fromkeys(
        ("ExceptionInfo", "Finding", "RelatedLocation", "RunStatus", "Trace", "TracedLine",
         "TracedVar"),
        "model",
    ),
}  # fmt: skip

__all__ = [
    "SCHEMA_ID",
    "ExceptionInfo",
    "Finding",
    "RelatedLocation",
    "RunStatus",
    "Trace",
    "TracedLine",
    "TracedVar",
    "load_trace",
    "trace_from_json",
    "trace_to_json",
    "write_trace",
]


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module 'shapelens.trace' has no attribute {name!r}")
    return getattr(importlib.import_module(f"shapelens.trace.{home}"), name)
