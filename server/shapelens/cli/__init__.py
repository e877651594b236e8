"""The ``shapelens`` command line."""
