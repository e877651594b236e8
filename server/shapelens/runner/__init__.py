"""Runs user code in a child process under the tracer and collects the trace.

The parent never imports user code: it spawns the user's interpreter, receives framed
records on a private pipe (never the user's stdout), and assembles a
:class:`shapelens.trace.Trace` even when the child crashes, hangs or calls ``os._exit``.
"""

from shapelens.runner.contract import RunRequest
from shapelens.runner.launcher import RunResult, UsageError, run_traced

__all__ = ["RunRequest", "RunResult", "UsageError", "run_traced"]
