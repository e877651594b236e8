"""Writes the bytecode of what the suites' processes import, once, in the venv whose python
runs it: ``make test`` runs it in each venv it makes (scripts/make_venv.sh), right
after the install.

The venvs are installed without compiling every file (~25 s of CPU per torch venv, most of
it never imported), and Python writes a module's bytecode when a process first imports it
(the Makefile unexports PYTHONDONTWRITEBYTECODE). But a suite starts several processes at
once that all import torch (its workers, their fork servers): without this, each would
compile the same ~2,000 files. What is not imported here is written by its first importer.
Standard library only: it runs on every interpreter the tests use, with or without torch.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys

MODULES = (
    # the traced programs': every venv
    "torch",
    "torch._dynamo",
    "numpy",
    # the library stack's (tests/test_library_stack.py), where it is installed
    "transformers.models.gpt2.modeling_gpt2",
    "timm",
    "lightning",
    "einops",
    # ShapeLens and the suite's own, in the venvs that run the tests
    "shapelens.cli.main",
    "shapelens.lsp.server",
    "shapelens.runner.zygote",
    "pytest",
    "xdist",
    "pytest_lsp",
    "debugpy",
    "ipykernel.kernelapp",
    "nbclient",
)


def main() -> None:
    sys.dont_write_bytecode = False  # whatever the environment says
    for name in MODULES:
        if importlib.util.find_spec(name.partition(".")[0]) is not None:  # installed here
            importlib.import_module(name)


if __name__ == "__main__":
    main()
