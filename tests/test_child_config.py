"""The child's configuration: one type, built from a request in one place, read back whole."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from shapelens.runner.contract import NO_FD, ChildConfig, ChildConfigError, RunRequest
from shapelens.settings.groups import FindingsConfig

# Every field of a request is either told to the child (as this field of its configuration)
# or handled by the parent alone: a new field must be put in one of the two.
TOLD_TO_THE_CHILD = {
    "target": "display",
    "args": "args",
    "cwd": "root",
    "include": "include",
    "exclude": "exclude",
    "functions": "functions",
    "findings": "findings",
    "flush_interval_s": "flush_interval",
    "stdin": "stdin",
    "debug": "debug",
    "log": "log",
    "backend": "backend",
    "sample_hits": "sample_hits",
    "keep_compile": "keep_compile",
    "scalars_on_gpu": "scalars_on_gpu",
    "fake": "fake",
    "gpu_memory_bytes": "gpu_memory_bytes",
    "memory": "memory",
}
PARENT_ONLY = {"module", "python", "env", "timeout_s", "capture_output"}


def _request(tmp_path_str: str) -> RunRequest:
    """A request whose every field the child reads differs from its default."""
    return RunRequest(
        target="train.py",
        args=("--epochs", "1"),
        cwd=tmp_path_str,
        include=("lib/*",),
        exclude=("lib/vendored/*",),
        functions=("step",),
        findings=FindingsConfig(broadcast=False, nonfinite_on_gpu=True, nonfinite_max_elements=7),
        flush_interval_s=0.5,
        stdin="empty",
        debug=True,
        log="run.log",
        backend="settrace",
        sample_hits=1000,
        keep_compile=True,
        scalars_on_gpu=True,
        fake=True,
        gpu_memory_bytes=24 * 2**30,
        memory=True,
    )


def test_every_request_field_is_told_to_the_child_or_kept_by_the_parent() -> None:
    fields = {f.name for f in dataclasses.fields(RunRequest)}
    assert fields == set(TOLD_TO_THE_CHILD) | PARENT_ONLY
    assert not set(TOLD_TO_THE_CHILD) & PARENT_ONLY


def test_a_config_built_for_a_request_carries_what_the_child_uses(tmp_path: Path) -> None:
    request = _request(str(tmp_path))
    defaults = RunRequest(target="x")
    config = ChildConfig.for_request(request, str(tmp_path), str(tmp_path / "train.py"))
    for request_field, config_field in TOLD_TO_THE_CHILD.items():
        value = getattr(request, request_field)
        assert value != getattr(defaults, request_field), f"{request_field}: set it in the test"
        assert getattr(config, config_field) == value, request_field
    assert config.mode == "script" and config.target == str(tmp_path / "train.py")
    assert config.fds == (NO_FD, NO_FD, NO_FD)  # set by whoever makes the pipes
    assert not config.fast_exit  # set by the fork server alone

    module = ChildConfig.for_request(
        dataclasses.replace(request, target="pkg.train", module=True), str(tmp_path), "pkg.train"
    )
    assert (module.mode, module.target, module.display) == ("module", "pkg.train", "pkg.train")


def test_a_config_round_trips_through_json(tmp_path: Path) -> None:
    built = ChildConfig.for_request(_request(str(tmp_path)), str(tmp_path), "/abs/train.py")
    config = dataclasses.replace(built.with_fds(channel=5, control=6, crash=7), fast_exit=True)
    assert config.fds == (5, 6, 7)
    text = config.to_json()
    assert ChildConfig.from_json(text) == config
    assert ChildConfig.from_dict(json.loads(text)) == config  # the fork server's way
    data = json.loads(text)
    assert data["findings"]["nonfinite_max_elements"] == 7
    assert data["channel_fd"] == 5 and data["args"] == ["--epochs", "1"]


_DROP = object()


def _json(config: ChildConfig, **changes: object) -> str:
    """``config`` as JSON with some keys changed, added, or dropped (``_DROP``)."""
    data = {**config.to_dict(), **changes}
    return json.dumps({k: v for k, v in data.items() if v is not _DROP})


def test_unknown_or_missing_keys_are_named(tmp_path: Path) -> None:
    config = ChildConfig.for_request(RunRequest(target="a.py"), str(tmp_path), "/abs/a.py")
    with pytest.raises(ChildConfigError, match=r"unknown keys colour, verbose \(written by"):
        ChildConfig.from_json(_json(config, verbose=True, colour="red"))
    with pytest.raises(ChildConfigError, match="findings: unknown key shout"):
        ChildConfig.from_json(_json(config, findings={"shout": True}))
    with pytest.raises(ChildConfigError, match="missing root, target"):
        ChildConfig.from_json(_json(config, root=_DROP, target=_DROP))
    with pytest.raises(ChildConfigError, match="not a JSON object"):
        ChildConfig.from_json("[1, 2]")
    # Keys with a default may be left out (fds not set yet, no fast exit).
    assert ChildConfig.from_json(_json(config, channel_fd=_DROP, fast_exit=_DROP)) == config
