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

from shapelens.settings.gpu_budget import budget_bytes
from shapelens.settings.options import OptionsError, RunOptions

NO_FD = -1
"""A descriptor not set yet: the runner that makes the pipes sets it."""


@dataclass(frozen=True, kw_only=True)
class RunRequest:
    """A run: what to run, where, and its options (the settings schema's groups, whole)."""

    target: str
    """Script path, or module name when ``module`` is true."""
    args: tuple[str, ...] = ()
    module: bool = False
    cwd: str = field(default_factory=os.getcwd)
    env: dict[str, str] | None = None
    """The whole environment of the run (None: this process's)."""
    options: RunOptions = field(default_factory=RunOptions)
    flush_interval_s: float = 0.25
    capture_output: bool = False
    """Pipe the script's stdout/stderr to ``on_output`` instead of inheriting them."""
    stdin: Literal["inherit", "empty"] = "inherit"
    """"empty": the script reads /dev/null (``input()`` raises EOFError). The language server
    needs it: an inherited stdin would be its own JSON-RPC stream."""

    @classmethod
    def for_options(
        cls,
        *,
        target: str,
        args: tuple[str, ...],
        module: bool,
        options: RunOptions,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        capture_output: bool = False,
        stdin: Literal["inherit", "empty"] = "inherit",
    ) -> RunRequest:
        """The one way the command line and the language server make a request; a budget
        the options cannot hold (``--gpu-memory 24 potatoes``) is a
        :class:`~shapelens.settings.gpu_budget.BudgetError` here, before anything runs."""
        budget_bytes(options.run.gpu_memory, options.run.gpu)
        return cls(
            target=target,
            args=args,
            module=module,
            cwd=cwd or os.getcwd(),
            env=env,
            options=options,
            capture_output=capture_output,
            stdin=stdin,
        )

    @property
    def python(self) -> str:
        """The interpreter that runs the program (``--python``, ``shapelens.interpreter``)."""
        return self.options.run.interpreter or sys.executable


class ChildConfigError(ValueError):
    """A configuration the child cannot read (written by another version of ShapeLens)."""


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
    options: RunOptions
    """The run's options, whole (:mod:`shapelens.settings.options`)."""
    flush_interval: float
    stdin: Literal["inherit", "empty"] = "inherit"
    """"empty": the child reads /dev/null (the runner that starts it sees to it)."""
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
            options=request.options,
            flush_interval=request.flush_interval_s,
            stdin=request.stdin,
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
        data["options"] = self.options.to_json()
        data["args"] = list(self.args)
        return data

    def to_json(self) -> str:
        return json.dumps(self.to_dict())

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ChildConfig:
        """The inverse of :meth:`to_dict`; a :class:`ChildConfigError` names any key that is
        unknown or missing, or an option that does not fit, rather than a ``TypeError`` from
        deep inside."""
        values = dict(_checked_keys(cls, data, "child configuration"))
        values["args"] = tuple(values["args"])
        try:
            values["options"] = RunOptions.from_json(values["options"])
        except OptionsError as err:
            raise ChildConfigError(f"child configuration: {err}") from None
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
