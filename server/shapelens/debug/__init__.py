"""Debugger integration: the inline-value helper evaluated through DAP in any debugpy session."""
