"""The child's configuration: one type, built from a request in one place, read back whole."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from shapelens.runner.contract import NO_FD, ChildConfig, ChildConfigError, RunRequest
from shapelens.settings.groups import FindingsConfig, RunSettings, TracingOptions
from shapelens.settings.options import RunOptions
from shapelens.settings.schema import settings_of

# The run's options reach the child whole; the rest of a request is told to the child as
# these fields of its configuration, or kept by the parent alone.
TOLD_TO_THE_CHILD = {
    "target": "display",
    "args": "args",
    "cwd": "root",
    "options": "options",
    "flush_interval_s": "flush_interval",
    "stdin": "stdin",
}
PARENT_ONLY = {"module", "env", "capture_output"}

OPTIONS = RunOptions(
    tracing=TracingOptions(
        functions=("step",),
        include=("lib/*",),
        exclude=("lib/vendored/*",),
        backend="settrace",
        sample_hits=1000,
        fake=True,
        stop_at_values=True,
        debug=True,
        log="run.log",
    ),
    run=RunSettings(
        interpreter="/opt/python",
        extra_env={"A": "1"},
        timeout_s=3.5,
        keep_compile=True,
        memory=True,
        gpu_memory="24GiB",
        gpu="a100-80gb",
        scalars_on_gpu=True,
    ),
    findings=FindingsConfig(
        broadcast=False,
        mismatch=False,
        nonfinite=False,
        warnings=False,
        degenerate=False,
        shape_comments=False,
        nonfinite_max_elements=7,
        nonfinite_on_gpu=True,
    ),
)
"""Options that differ from the defaults in every setting of every group."""


def _request(tmp_path_str: str) -> RunRequest:
    """A request whose every field the child reads differs from its default."""
    return RunRequest(
        target="train.py",
        args=("--epochs", "1"),
        cwd=tmp_path_str,
        options=OPTIONS,
        flush_interval_s=0.5,
        stdin="empty",
    )


def test_every_option_differs_from_its_default_in_the_test() -> None:
    for group in ("tracing", "run", "findings"):
        ours, default = getattr(OPTIONS, group), getattr(RunOptions(), group)
        for item in settings_of(type(ours)):
            assert getattr(ours, item.name) != getattr(default, item.name), item.name


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
    assert data["options"]["findings"]["nonfinite_max_elements"] == 7
    assert data["options"]["tracing"]["functions"] == ["step"]
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
    with pytest.raises(ChildConfigError, match="findings: unknown shout"):
        ChildConfig.from_json(_json(config, options={"findings": {"shout": True}}))
    with pytest.raises(ChildConfigError, match=r"tracing.fake: expected true or false"):
        ChildConfig.from_json(_json(config, options={"tracing": {"fake": "yes"}}))
    with pytest.raises(ChildConfigError, match="missing root, target"):
        ChildConfig.from_json(_json(config, root=_DROP, target=_DROP))
    with pytest.raises(ChildConfigError, match="not a JSON object"):
        ChildConfig.from_json("[1, 2]")
    # Keys with a default may be left out (fds not set yet, no fast exit).
    assert ChildConfig.from_json(_json(config, channel_fd=_DROP, fast_exit=_DROP)) == config
