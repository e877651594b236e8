"""The trace: what a traced run produced, and its versioned JSON file format."""

from shapelens.trace.codec import SCHEMA_ID, load_trace, trace_from_json, trace_to_json, write_trace
from shapelens.trace.model import (
    ExceptionInfo,
    Finding,
    RelatedLocation,
    RunStatus,
    Trace,
    TracedLine,
    TracedVar,
)

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
