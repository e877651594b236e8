"""Presenters of a trace shared by the CLI listing and the language server."""
