"""The version of ShapeLens, written here only: ``shapelens.__version__``, pyproject.toml
(dynamic), every trace's ``producer`` and, checked by tests/test_version.py, package.json.
A module of its own so that ``trace/`` can name it without importing the package's root."""

__version__ = "0.1.0"
