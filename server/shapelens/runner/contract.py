"""What a run is asked to do (:class:`RunRequest`), and what its child is told
(:class:`ChildConfig`).

One configuration for every way a child starts: the cold runner passes it as JSON on the
bootstrap's command line, the warm runner sends it to the fork server, a distributed run
hands it to every rank through torchrun. Each of them builds it with
:meth:`ChildConfig.for_request` and sets the descriptors it made with
:meth:`ChildConfig.with_fds`. The messages that come back are in
:mod:`shapelens.trace.messages`.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from shapelens.settings.groups import FindingsConfig

NO_FD = -1
"""A descriptor not set yet: the runner that makes the pipes sets it."""


@dataclass(frozen=True, kw_only=True)
class RunRequest:
    target: str
    """Script path, or module name when ``module`` is true."""
    args: tuple[str, ...] = ()
    module: bool = False
    cwd: str = field(default_factory=os.getcwd)
    python: str = sys.executable
    env: dict[str, str] | None = None
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    functions: tuple[str, ...] = ()
    findings: FindingsConfig = field(default_factory=FindingsConfig)
    timeout_s: float | None = None
    flush_interval_s: float = 0.25
    capture_output: bool = False
    """Pipe the script's stdout/stderr to ``on_output`` instead of inheriting them."""
    stdin: Literal["inherit", "empty"] = "inherit"
    """"empty": the script reads /dev/null (``input()`` raises EOFError). The language server
    needs it: an inherited stdin would be its own JSON-RPC stream."""
    debug: bool = False
    """Start debugpy in the child (127.0.0.1, free port) and wait for a DAP client."""
    log: str | None = None
    """Also write the TorchSnooper-style log of the whole run to this file ("-": stderr)."""
    backend: str = "auto"
    """Tracing mechanism: "auto" (sys.monitoring on 3.12+), "settrace" or "monitoring"."""
    sample_hits: int | None = None
    """With sys.monitoring: stop a line's events after this many hits (counts become ≥)."""
    keep_compile: bool = False
    """Let torch.compile compile the program's functions (no hints inside them); by
    default they run eagerly, with hints."""
    scalars_on_gpu: bool = False
    """Read 0-dim GPU tensors (a loss) for their course; each read synchronises the device."""
    fake: bool = False
    """A shape-only run: the program on fake tensors (no data; CUDA simulated without a GPU)."""
    gpu_memory_bytes: int | None = None
    """A shape-only run's GPU memory: an ``out_of_memory`` finding where it runs out."""
    memory: bool = False
    """Count a real run's tensor memory and FLOPs (a shape-only run always does)."""


class ChildConfigError(ValueError):
    """A configuration the child cannot read (written by another version of ShapeLens)."""


_TUPLES = ("args", "include", "exclude", "functions")


@dataclass(frozen=True, kw_only=True)
class ChildConfig:
    mode: Literal["script", "module"]
    target: str
    """The script's absolute path, or the module's name."""
    display: str
    """The target as the user wrote it, for messages."""
    args: tuple[str, ...]
    root: str
    """The run's working directory: user code lives under it."""
    include: tuple[str, ...]
    exclude: tuple[str, ...]
    functions: tuple[str, ...]
    findings: FindingsConfig
    flush_interval: float
    stdin: Literal["inherit", "empty"] = "inherit"
    """"empty": the child reads /dev/null (the runner that starts it sees to it)."""
    debug: bool = False
    """Listen for a debugger (debugpy, 127.0.0.1) and wait for it before running."""
    log: str | None = None
    """Write the TorchSnooper-style log of the whole run here ("-": stderr)."""
    backend: str = "auto"
    """"settrace", "monitoring" (3.12+), or "auto": monitoring where available."""
    sample_hits: int | None = None
    """monitoring only: stop line events after this many hits of a line."""
    keep_compile: bool = False
    """Let the program's torch.compile regions compile (their lines get no hints); by
    default they run eagerly."""
    scalars_on_gpu: bool = False
    """Read 0-dim GPU tensors for their course (synchronises the device)."""
    fake: bool = False
    """Run on fake tensors (:mod:`shapelens.engine.shape_only`)."""
    gpu_memory_bytes: int | None = None
    """The simulated GPU's memory (:mod:`shapelens.engine.memory`)."""
    memory: bool = False
    """Watch the memory of a real run too (:mod:`shapelens.engine.memory`)."""
    fast_exit: bool = False
    """Forked from the warm runner: once the results are sent, skip interpreter teardown
    (as multiprocessing's children do), which would cost ~0.4 s with torch loaded."""
    channel_fd: int = NO_FD
    """Where the child writes its messages (a pipe, or a rank's file)."""
    control_fd: int = NO_FD
    """Where the parent asks for a last flush ("stop"); its EOF means the parent is gone."""
    crash_fd: int = NO_FD
    """faulthandler writes the Python stack here if the process dies of a fatal signal."""

    @classmethod
    def for_request(cls, request: RunRequest, cwd: str, target: str) -> ChildConfig:
        """The child's configuration for ``request``, run in ``cwd`` (absolute); ``target``
        is the script's absolute path (or the module's name). Descriptors not set yet."""
        return cls(
            mode="module" if request.module else "script",
            target=request.target if request.module else target,
            display=request.target,
            args=request.args,
            root=cwd,
            include=request.include,
            exclude=request.exclude,
            functions=request.functions,
            findings=request.findings,
            flush_interval=request.flush_interval_s,
            stdin=request.stdin,
            debug=request.debug,
            log=request.log,
            backend=request.backend,
            sample_hits=request.sample_hits,
            keep_compile=request.keep_compile,
            scalars_on_gpu=request.scalars_on_gpu,
            fake=request.fake,
            gpu_memory_bytes=request.gpu_memory_bytes,
            memory=request.memory,
        )

    def with_fds(self, *, channel: int, control: int, crash: int) -> ChildConfig:
        """This configuration with the descriptors the child will have."""
        return dataclasses.replace(self, channel_fd=channel, control_fd=control, crash_fd=crash)

    @property
    def fds(self) -> tuple[int, int, int]:
        """The channel, control and crash descriptors."""
        return self.channel_fd, self.control_fd, self.crash_fd

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON values, keyed by field name."""
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        data["findings"] = dataclasses.asdict(self.findings)
        for key in _TUPLES:
            data[key] = list(data[key])
        return data

    def to_json(self) -> str:
        return json.dumps(self.to_dict())

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ChildConfig:
        """The inverse of :meth:`to_dict`; a :class:`ChildConfigError` names any key that is
        unknown or missing, rather than a ``TypeError`` from deep inside."""
        values = dict(_checked_keys(cls, data, "child configuration"))
        for key in _TUPLES:
            values[key] = tuple(values[key])
        findings = values["findings"]
        if not isinstance(findings, Mapping):
            raise ChildConfigError(f"child configuration: findings is not an object: {findings!r}")
        values["findings"] = FindingsConfig(
            **_checked_keys(FindingsConfig, findings, "child configuration's findings")
        )
        return cls(**values)

    @classmethod
    def from_json(cls, text: str) -> ChildConfig:
        data = json.loads(text)
        if not isinstance(data, dict):
            raise ChildConfigError(f"child configuration is not a JSON object: {text[:80]!r}")
        return cls.from_dict(data)


def _checked_keys(kind: type, data: Mapping[str, Any], what: str) -> Mapping[str, Any]:
    known = {f.name: f for f in dataclasses.fields(kind)}
    unknown = sorted(set(data) - set(known))
    if unknown:
        raise ChildConfigError(
            f"{what}: unknown key{'s' if len(unknown) > 1 else ''} {', '.join(unknown)} "
            "(written by another version of ShapeLens?)"
        )
    required = (
        name
        for name, f in known.items()
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    )
    missing = sorted(name for name in required if name not in data)
    if missing:
        raise ChildConfigError(f"{what}: missing {', '.join(missing)}")
    return data
