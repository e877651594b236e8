"""Runs user code in a child process under the tracer and collects the trace.

The parent never imports user code: it spawns the user's interpreter, receives framed
records on a private pipe (never the user's stdout), and assembles a
:class:`shapelens.trace.Trace` even when the child crashes, hangs or calls ``os._exit``.
The parent's entry point is :func:`shapelens.runner.launcher.run_traced`; the child's is
:mod:`shapelens.runner.child`. This package imports neither: the child starts faster when it
does not load the parent's side (subprocess, the trace builder) first.
"""
