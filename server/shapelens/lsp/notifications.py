"""Custom notifications the server sends (the VS Code extension listens for them)."""

TRACE_UPDATED = "shapelens/traceUpdated"
"""Every hint of one document version (``features.trace_updates``), after runs and edits."""

DEBUG_LISTENING = "shapelens/debugListening"
"""Where debugpy waits for a DAP client during a ``"debug": true`` run."""
