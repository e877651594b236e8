"""The settings schema is the one source of the CLI flags, the client's settings and the
extension manifest: each surface is derived from it, and a test fails on any drift."""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

import shapelens.cli.main as cli
from shapelens.lsp.settings import Settings, parse_settings
from shapelens.runner.contract import ChildConfig, RunRequest
from shapelens.runner.launcher import UsageError
from shapelens.settings.export import REPOSITORY_MANIFEST, configuration, write
from shapelens.settings.groups import (
    FindingsConfig,
    HintSettings,
    NotebookSettings,
    RunSettings,
    TracingOptions,
)
from shapelens.settings.options import RunOptions
from shapelens.settings.schema import settings_of

REPOSITORY = Path(__file__).resolve().parents[1]

# The flags `shapelens run` has always had: a flag is renamed or dropped only on purpose.
RUN_FLAGS = {
    "-h", "--help", "-m", "--json", "--function", "--include", "--exclude", "--timeout",
    "--python", "--quiet", "-q", "--nproc-per-node", "--torchrun-arg", "--backend", "--sample",
    "--compile", "--log", "--debug", "--hints", "--modules", "--coverage", "--color",
    "--no-color", "--no-findings", "--nonfinite-max-elements", "--nonfinite-on-gpu",
    "--scalars-on-gpu", "--fake", "--dim-names", "--gpu-memory", "--gpu", "--memory",
    "--stop-at-values", "--collective-timeout",
}  # fmt: skip

# The settings a client sends (what the extension's serverSettings writes), and a valid
# value of each that is not its default.
CLIENT_VALUES: dict[str, Any] = {
    "interpreter": "/usr/bin/python3",
    "extraEnv": {"A": "1"},
    "timeout": 2,
    "compile": True,
    "scalarsOnGpu": True,
    "memory": True,
    "gpuMemory": "24GiB",
    "gpu": "rtx-4090",
    "findings": {
        "broadcast": False,
        "mismatch": False,
        "nonfinite": False,
        "warnings": False,
        "degenerate": False,
        "shapeComments": False,
    },
    "nonfiniteMaxElements": 10,
    "nonfiniteOnGpu": True,
    "hintFormat": "full",
    "coverage": True,
    "dimNames": "both",
    "maxHintLength": 12,
    "traceDir": "traces",
}


def test_the_manifest_is_the_schemas() -> None:
    """package.json's settings are generated: `python -m shapelens.settings.export`."""
    manifest = json.loads(REPOSITORY_MANIFEST.read_text(encoding="utf-8"))
    assert REPOSITORY_MANIFEST == REPOSITORY / "package.json"
    assert manifest["contributes"]["configuration"] == configuration()


def test_the_export_rewrites_the_configuration_alone(tmp_path: Path) -> None:
    copy = tmp_path / "package.json"
    shutil.copy(REPOSITORY_MANIFEST, copy)
    before = json.loads(copy.read_text(encoding="utf-8"))
    stale = json.loads(json.dumps(before))
    stale["contributes"]["configuration"]["properties"].popitem()
    copy.write_text(json.dumps(stale, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    write(copy)
    assert copy.read_text(encoding="utf-8") == REPOSITORY_MANIFEST.read_text(encoding="utf-8")


def test_the_extension_reads_every_manifest_setting() -> None:
    """settings.ts reads each setting by name: one the manifest lacks, or one it no longer
    reads, is drift between the two."""
    source = (REPOSITORY / "vscode-extension" / "src" / "settings.ts").read_text("utf-8")
    read = set(re.findall(r'pick\("([\w.]+)"', source))
    assert read == {key.removeprefix("shapelens.") for key in configuration()["properties"]}


def test_every_run_flag_keeps_its_name() -> None:
    parser = cli.build_parser()
    (commands,) = (a for a in parser._actions if a.dest == "command")
    run = commands.choices["run"]  # type: ignore[index]
    assert {o for action in run._actions for o in action.option_strings} == RUN_FLAGS


@pytest.fixture
def asked(monkeypatch: pytest.MonkeyPatch) -> list[RunRequest]:
    """The requests ``shapelens run`` makes; none runs."""
    requests: list[RunRequest] = []

    def capture(request: RunRequest, **_: object) -> None:
        requests.append(request)
        raise UsageError("captured")

    monkeypatch.setattr(cli, "run_traced", capture)
    return requests


def test_without_flags_a_run_has_the_schemas_defaults(asked: list[RunRequest]) -> None:
    assert cli.main(["run", "main.py", "a"]) == 2
    (request,) = asked
    assert request == RunRequest(target="main.py", args=("a",), cwd=request.cwd)
    assert request.python == sys.executable


def test_every_run_flag_reaches_the_request(asked: list[RunRequest], tmp_path: Path) -> None:
    log = str(tmp_path / "run.log")
    argv = [
        "run", "--function", "f", "--function", "B.forward", "--include", "lib/*",
        "--exclude", "gen/*", "--backend", "settrace", "--sample", "3", "--fake",
        "--stop-at-values", "--debug",
        f"--log={log}", "--python", "/opt/python", "--timeout", "1.5", "--compile",
        "--scalars-on-gpu", "--no-findings", "broadcast", "--no-findings", "warnings",
        "--gpu", "rtx-4090", "--memory",
        "--nonfinite-max-elements", "7", "--nonfinite-on-gpu", "-m", "pkg.main", "x",
    ]  # fmt: skip
    assert cli.main(argv) == 2
    (request,) = asked
    assert (request.target, request.args, request.module) == ("pkg.main", ("x",), True)
    tracing, run = request.options.tracing, request.options.run
    assert tracing.functions == ("f", "B.forward")
    assert (tracing.include, tracing.exclude) == (("lib/*",), ("gen/*",))
    assert (tracing.backend, tracing.sample_hits, tracing.fake, tracing.debug) == (
        "settrace", 3, True, True
    )  # fmt: skip
    assert tracing.stop_at_values
    assert (tracing.log, request.python, run.timeout_s) == (log, "/opt/python", 1.5)
    assert run.keep_compile and run.scalars_on_gpu and run.memory
    assert (run.gpu, run.gpu_memory) == ("rtx-4090", None)
    assert request.options.findings == FindingsConfig(
        broadcast=False,
        mismatch=True,
        nonfinite=True,
        warnings=False,
        nonfinite_max_elements=7,
        nonfinite_on_gpu=True,
    )


def test_a_run_option_is_declared_once() -> None:
    """Options reach the child as the schema's groups, whole: no request or child
    configuration field repeats a setting of a group (a copy would have to be kept in step
    by hand, and once was not)."""
    option_names = {
        item.name for group in (TracingOptions, RunSettings, FindingsConfig)
        for item in settings_of(group)
    }  # fmt: skip
    assert {f.name for f in dataclasses.fields(RunOptions)} == {"tracing", "run", "findings"}
    for record in (RunRequest, ChildConfig):
        copied = {f.name for f in dataclasses.fields(record)} & option_names
        assert not copied, f"{record.__name__} copies {copied}"


def test_every_client_setting_is_read() -> None:
    settings, problems = parse_settings({"shapelens": CLIENT_VALUES})
    assert not problems
    assert settings == Settings(
        run=RunSettings(
            interpreter="/usr/bin/python3",
            extra_env={"A": "1"},
            timeout_s=2.0,
            keep_compile=True,
            scalars_on_gpu=True,
            memory=True,
            gpu_memory="24GiB",
            gpu="rtx-4090",
        ),
        findings=FindingsConfig(
            broadcast=False,
            mismatch=False,
            nonfinite=False,
            warnings=False,
            degenerate=False,
            shape_comments=False,
            nonfinite_max_elements=10,
            nonfinite_on_gpu=True,
        ),
        hints=HintSettings(hint_format="full", coverage=True, dim_names="both", max_hint_length=12),
        notebooks=NotebookSettings(trace_dir="traces"),
    )
    assert isinstance(settings.run.timeout_s, float)


def test_client_keys_are_the_schemas() -> None:
    """Every key the server reads is declared once, on the field it sets."""
    keys = [
        item.meta.key
        for group in (RunSettings, FindingsConfig, HintSettings, NotebookSettings)
        for item in settings_of(group)
        if item.meta.key is not None
    ]
    assert len(keys) == len(set(keys))
    flat = {k for k in CLIENT_VALUES if k != "findings"}
    assert set(keys) == flat | {f"findings.{k}" for k in CLIENT_VALUES["findings"]}


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        ({"timeout": -3}, "shapelens.timeout: invalid value -3, using the default"),
        ({"timeout": True}, "shapelens.timeout: invalid value True, using the default"),
        ({"maxHintLength": 2.5}, "shapelens.maxHintLength: invalid value 2.5, using the default"),
        ({"hintFormat": "long"}, "shapelens.hintFormat: invalid value 'long', using the default"),
        ({"interpreter": " "}, "shapelens.interpreter: invalid value ' ', using the default"),
        ({"extraEnv": {"A": 1}}, "shapelens.extraEnv: invalid value {'A': 1}, using the default"),
        ({"coverage": None}, "shapelens.coverage: invalid value None, using the default"),
        (
            {"findings": {"nonfinite": "yes"}},
            "shapelens.findings.nonfinite: invalid value 'yes', using the default",
        ),
        ({"findings": {"colour": True}}, "shapelens.findings.colour: unknown setting"),
        ({"findings": True}, "shapelens.findings: unknown setting"),
        ({"displayMode": "inlayHints"}, "shapelens.displayMode: unknown setting"),
    ],
)
def test_a_bad_client_setting_is_reported_and_changes_nothing(raw: Any, problem: str) -> None:
    base, _ = parse_settings(CLIENT_VALUES)
    assert parse_settings({"shapelens": raw}, base) == (base, [problem])


def test_null_clears_an_optional_setting() -> None:
    set_once, _ = parse_settings({"timeout": 5, "traceDir": "t"})
    cleared, problems = parse_settings({"timeout": None, "traceDir": None}, set_once)
    assert not problems and cleared == Settings()


def test_settings_that_are_not_an_object_are_reported() -> None:
    assert parse_settings([1, 2]) == (
        Settings(),
        ["shapelens settings must be an object, got list"],
    )
    assert parse_settings(None) == (Settings(), [])
