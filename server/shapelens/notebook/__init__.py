"""ShapeLens in notebooks: ``%load_ext shapelens`` traces a kernel's cells in-process.

:mod:`shapelens.notebook.session` runs cells under the engine and keeps the session's trace
file; :mod:`shapelens.notebook.ipython` hooks it into IPython (events and magics).
"""
