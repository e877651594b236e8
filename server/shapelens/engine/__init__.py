"""The in-process engine: runs next to the user's code in the child process.

Only the standard library is imported here (torch and numpy are read duck-typed when the
user's code has imported them), so the engine starts fast and works on any interpreter.
"""
