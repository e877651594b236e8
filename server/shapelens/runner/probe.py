"""What ``shapelens doctor`` asks the interpreter a run would use: ``python probe.py`` prints
one JSON object on stdout (:class:`shapelens.runner.doctor.Probe` reads it).

It runs in that interpreter, which may be any Python 3: until the version is checked, only
syntax and modules every Python 3 has. torch is imported here, never in the server.
"""

import importlib.util
import json
import os
import platform
import sys
from typing import Any

MINIMUM = (3, 10)
"""The oldest Python the traced child runs on."""


def _version(name: str) -> Any:
    """The installed version of ``name``, or None."""
    if importlib.util.find_spec(name) is None:
        return None
    from importlib import metadata  # 3.8+: the version check has passed

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "(installed, no version)"


def _torch() -> Any:
    if importlib.util.find_spec("torch") is None:
        return None
    try:
        import torch
    except Exception as err:  # a broken install: say how it breaks
        return {"error": f"{type(err).__name__}: {err}"}
    cuda = torch.cuda.is_available()
    devices = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    return {
        "version": torch.__version__,
        "cuda": cuda,
        "cuda_version": torch.version.cuda,
        "devices": devices if cuda else [],
    }


def _tracing() -> Any:
    """The core a run gets here, chosen by the engine's own rule."""
    from shapelens.engine.backends.choice import choose_backend

    choice = choose_backend()
    return {"core": choice.core, "gate_off": choice.gate_off}


def main() -> None:
    # This package's root in place of runner/ (python put this file's folder first): its
    # modules' names (protocol, child, ...) must not shadow what torch imports.
    sys.path[0] = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    found: dict[str, Any] = {
        "python": platform.python_version(),
        "implementation": sys.implementation.name,
        "executable": sys.executable,
        "platform": f"{platform.system()} {platform.machine()}",
    }
    if sys.version_info[:2] < MINIMUM:
        found["too_old"] = True
    else:
        found["tracing"] = _tracing()
        found["torch"] = _torch()
        found["debugpy"] = _version("debugpy")
        found["ipykernel"] = _version("ipykernel")
    print(json.dumps(found))


if __name__ == "__main__":
    main()
