"""Shared helpers: run ``shapelens run`` the way a user does and read back its trace."""

from __future__ import annotations

import functools
import importlib
import json
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from shapelens.present.findings import finding_message, related_locations
from shapelens.runner.warm import FORK_SERVER_VARIABLE, WarmRunner
from shapelens.trace.finding import finding_from_json

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"
IN_CI = bool(os.environ.get("CI"))
"""CI (``CI`` set) installs everything the suite needs: there a missing requirement fails."""


def need(module: str) -> ModuleType:
    """``module``, imported. Without it the test (or, called at module level, the file) is
    skipped here, but fails in CI, so that a broken install cannot pass as skips."""
    try:
        return importlib.import_module(module)
    except ImportError as err:
        if IN_CI:
            pytest.fail(f"CI runs every test, and {module} does not import: {err}", pytrace=False)
        pytest.skip(f"needs {module}", allow_module_level=True)


CHILD_PYTHON = os.environ.get("SHAPELENS_TEST_PYTHON") or None
"""The interpreter traced programs run in (``shapelens run --python``): another torch or
Python for the compatibility stage (``make test-compat``); unset, the one running the tests."""


def child_python() -> list[str]:
    """``--python CHILD_PYTHON`` for ``shapelens run``, or nothing."""
    return ["--python", CHILD_PYTHON] if CHILD_PYTHON else []


@functools.cache
def lines_switch_off() -> bool:
    """Whether a run's hot lines are switched off once their hits can be estimated (their
    counts then say so, ``sampled``): under sys.monitoring (3.12+) and the C gate (3.11),
    not under plain sys.settrace. Asked of the interpreter the programs run in."""
    asked = subprocess.run(
        [
            CHILD_PYTHON or sys.executable,
            "-c",
            "from shapelens.engine.backends.choice import choose_backend as c;print(c().core)",
        ],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(REPO / "server")},  # as `--python` runs it
    )
    return asked.stdout.strip() in ("gate", "monitoring")


LIBRARY_STACK = (
    "torch",
    "torchvision",
    "transformers",
    "lightning",
    "timm",
    "einops",
    "accelerate",
)
"""What people train with: the Makefile pins them (LIBRARY_PINS) in the 3.12 venv."""
LIBRARY_PYTHON_VARIABLE = "SHAPELENS_LIBRARY_PYTHON"
DEFAULT_LIBRARY_PYTHON = REPO / ".venv312" / "bin" / "python"
_PRINT_MISSING = (
    "import importlib.util, sys\n"
    "print(*(name for name in sys.argv[1:] if importlib.util.find_spec(name) is None))"
)


def _stack_missing(python: str) -> str | None:
    """What of LIBRARY_STACK ``python`` lacks, or None. Found, not imported (importing them
    all takes 6 s of CPU): a broken one fails the test that imports it."""
    if not os.path.exists(python):
        return f"{python} does not exist"
    check = subprocess.run(
        [python, "-c", _PRINT_MISSING, *LIBRARY_STACK], capture_output=True, text=True, timeout=60
    )
    if check.returncode != 0:
        lines = check.stderr.strip().splitlines() or [f"exit status {check.returncode}"]
        return f"{python} fails: {lines[-1]}"
    missing = check.stdout.split()
    return f"{python} lacks {', '.join(missing)}" if missing else None


@pytest.fixture(scope="session")
def library_python() -> str:
    """An interpreter that has LIBRARY_STACK, for programs traced with ``--python``:
    $SHAPELENS_LIBRARY_PYTHON (the 3.12 suite sets it; one that lacks the stack fails the
    tests), else the 3.12 venv when it has the stack.
    Without one the tests skip here and fail in CI, as with need()."""
    configured = os.environ.get(LIBRARY_PYTHON_VARIABLE)
    python = configured or str(DEFAULT_LIBRARY_PYTHON)
    missing = _stack_missing(python)
    if missing is None:
        return python
    if configured:
        pytest.fail(f"{LIBRARY_PYTHON_VARIABLE} is set, but {missing}", pytrace=False)
    if IN_CI:
        pytest.fail(f"CI runs every test, and {missing}", pytrace=False)
    pytest.skip(f"needs the library stack (make other-venvs): {missing}")


@dataclass
class Run:
    returncode: int
    stdout: str
    stderr: str
    trace: dict[str, Any] | None

    def line(self, file: Path | str, number: int) -> dict[str, Any] | None:
        assert self.trace is not None
        for entry in self.trace["lines"]:
            if entry["file"] == os.path.realpath(file) and entry["line"] == number:
                return entry
        return None

    def var(self, file: Path | str, number: int, name: str) -> dict[str, Any]:
        entry = self.line(file, number)
        assert entry is not None, f"line {number} was not traced"
        for var in entry["vars"]:
            if var["name"] == name:
                return var
        raise AssertionError(f"{name} not on line {number}: {[v['name'] for v in entry['vars']]}")

    def findings(self, kind: str) -> list[dict[str, Any]]:
        """The trace's findings of ``kind``: their data, plus ``message`` and ``related`` as
        the user reads them (rendered by ``shapelens.present``, as every surface does)."""
        assert self.trace is not None
        return [rendered(f) for f in self.trace["findings"] if f["kind"] == kind]


def told(run: Run) -> list[tuple[Any, ...]]:
    """What the user is told of each finding: where, what, what was passed, and the lines
    its chain goes through (from the line where the wrong value started)."""
    assert run.trace is not None, run.stderr
    return sorted(
        (
            f["kind"],
            os.path.basename(f["file"]),
            f["line"],
            f.get("expression"),
            f.get("error"),
            tuple((o.get("name"), tuple(o.get("shape") or ())) for o in f.get("operands", [])),
            tuple((os.path.basename(s["file"]), s["line"]) for s in f.get("chain", [])),
        )
        for f in run.trace["findings"]
    )


def rendered(data: dict[str, Any]) -> dict[str, Any]:
    finding = finding_from_json(data)
    related = [
        {"file": r.file, "line": r.line, "message": r.message} for r in related_locations(finding)
    ]
    return {**data, "message": finding_message(finding), "related": related}


SAMPLES = Path(__file__).with_name("samples")
"""Small programs that every backend must trace alike."""


def _hits(count: int, estimated: bool) -> int | str:
    """Exact counts compare as they are; an estimate (the line's events were switched off:
    see :func:`lines_switch_off`) as "≈" when it is within 2 % of ``count``: see same_hits."""
    return f"≈{count}" if estimated else count


def normalised_trace(trace: dict[str, Any]) -> dict[str, Any]:
    """What two backends (or the gate and plain sys.settrace) must agree on in a trace."""
    return {
        "status": trace["status"],
        "lines": [
            (
                entry["line"],
                _hits(entry["hits"], entry.get("sampled", False)),
                [
                    (
                        v["name"],
                        v["shape"],
                        v["dtype"],
                        _hits(v["hits"], entry.get("sampled", False)),
                        v["shapes"],
                    )
                    for v in entry["vars"]
                ],
            )
            for entry in trace["lines"]
        ],
        "findings": [(f["kind"], f["line"], rendered(f)["message"]) for f in trace["findings"]],
    }


def same_hits(estimated: Any, exact: Any) -> Any:
    """``estimated`` with each "≈N" replaced by the exact count it estimates, when close."""
    if isinstance(estimated, str) and estimated.startswith("≈") and isinstance(exact, int):
        return exact if abs(int(estimated[1:]) - exact) <= max(1, exact * 0.02) else estimated
    if (
        isinstance(estimated, (list, tuple))
        and isinstance(exact, (list, tuple))
        and len(estimated) == len(exact)
    ):
        return type(estimated)(same_hits(a, b) for a, b in zip(estimated, exact, strict=True))
    if isinstance(estimated, dict) and isinstance(exact, dict):
        return {k: same_hits(v, exact.get(k)) for k, v in estimated.items()}
    return estimated


_FORK_SERVERS: dict[str, WarmRunner] = {}


def _fork_server(python: str | None = None) -> dict[str, str]:
    """SHAPELENS_FORK_SERVER for ``shapelens run``: one fork server per interpreter (default
    CHILD_PYTHON) and test process, started on first use, so a run costs a fork, not an
    interpreter start and ``import torch`` (~2 s of CPU). Tests of how a run's process
    starts pass ``cold=True``."""
    python = python or CHILD_PYTHON or sys.executable
    server = _FORK_SERVERS.get(python)
    if server is None:
        server = _FORK_SERVERS[python] = WarmRunner(python)
    deadline = time.monotonic() + 120
    while not server.ready:
        if time.monotonic() > deadline:
            return {}  # not started (it says nothing): cold runs, still correct
        time.sleep(0.05)
    return {FORK_SERVER_VARIABLE: server.directory}


def suite_fork_server_pid() -> int | None:
    """The process id of this process's fork server (started when not yet)."""
    _fork_server()
    server = _FORK_SERVERS.get(CHILD_PYTHON or sys.executable)
    return None if server is None else server.server_pid


def pytest_sessionfinish() -> None:
    for server in _FORK_SERVERS.values():
        server.close()


def run_cli(
    *args: str,
    cwd: Path,
    stdin: str | None = None,
    timeout: float = 120,
    env: dict[str, str] | None = None,
    cold: bool = False,
    python: str | None = None,
) -> Run:
    """``shapelens run --json TRACE ARGS`` in ``cwd``; the trace is read back when written.
    The program runs in ``python`` (``--python``; default CHILD_PYTHON), forked from this
    process's fork server for that interpreter unless ``cold``."""
    trace_path = cwd / ".trace.json"
    if trace_path.exists():
        trace_path.unlink()
    interpreter = ["--python", python] if python else child_python()
    command = [sys.executable, "-m", "shapelens", "run", *interpreter, "--json", str(trace_path)]
    command += args
    process = subprocess.run(
        command,
        cwd=cwd,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **({} if cold else _fork_server(python)), **(env or {})},
    )
    trace = json.loads(trace_path.read_text()) if trace_path.exists() else None
    return Run(process.returncode, process.stdout, process.stderr, trace)


@contextmanager
def warm_runner(env: dict[str, str]) -> Iterator[WarmRunner]:
    """A ready fork server for this interpreter, as the language server keeps one: runs
    forked from it skip the interpreter start and ``import torch`` (~2 s of CPU each). For
    tests about what a run records, not about how its process starts."""
    runner = WarmRunner(CHILD_PYTHON or sys.executable, env)
    try:
        deadline = time.monotonic() + 120
        while not runner.ready:
            assert time.monotonic() < deadline, "the fork server did not start"
            time.sleep(0.05)
        yield runner
    finally:
        runner.close()


@pytest.fixture
def script(tmp_path: Path):  # type: ignore[no-untyped-def]
    """Write a dedented script into a fresh project folder and return its path."""

    def write(source: str, name: str = "main.py") -> Path:
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(source).lstrip("\n"), encoding="utf-8")
        return path

    return write


def alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie, exited but not yet reaped, does not)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rpartition(")")[2].split()[0] != "Z"
    except FileNotFoundError:
        return False


def line_of(path: Path, marker: str) -> int:
    """1-based number of the first line starting with ``marker`` (tests name lines, not numbers)."""
    for number, text in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if text.strip().startswith(marker):
            return number
    raise AssertionError(f"{marker!r} not in {path}")


# -- language server -------------------------------------------------------------------------
import pytest_lsp  # noqa: E402
from lsprotocol import types  # noqa: E402
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities  # noqa: E402

TRACE_UPDATED = "shapelens/traceUpdated"


class LspSession:
    """A started server, the client talking to it, and what the server sent."""

    def __init__(self, client: LanguageClient, root: Path) -> None:
        self.client = client
        self.root = root
        self.trace_updates: list[dict[str, Any]] = []
        self.refreshes = 0
        self.initialize_result: types.InitializeResult | None = None

    def write(self, name: str, source: str) -> tuple[Path, str]:
        path = self.root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(source).lstrip("\n"), encoding="utf-8")
        return path, path.as_uri()

    def open(self, path: Path, version: int = 1) -> str:
        uri = path.as_uri()
        self.client.text_document_did_open(
            types.DidOpenTextDocumentParams(
                text_document=types.TextDocumentItem(
                    uri=uri, language_id="python", version=version, text=path.read_text()
                )
            )
        )
        return uri

    async def run(self, uri: str, **extra: Any) -> dict[str, Any]:
        result = await self.client.workspace_execute_command_async(
            types.ExecuteCommandParams(command="shapelens.run", arguments=[{"uri": uri, **extra}])
        )
        assert isinstance(result, dict), result
        return result

    async def code_actions(
        self, uri: str, line: int, only: list[str] | None = None
    ) -> list[types.CodeAction]:
        """The code actions offered at column 4 of ``line`` (0-based)."""
        found = await self.client.text_document_code_action_async(
            types.CodeActionParams(
                text_document=types.TextDocumentIdentifier(uri=uri),
                range=types.Range(types.Position(line, 4), types.Position(line, 4)),
                context=types.CodeActionContext(diagnostics=[], only=only),
            )
        )
        return [a for a in found or [] if isinstance(a, types.CodeAction)]

    async def hints(self, uri: str, lines: int = 200) -> dict[int, str]:
        found = await self.client.text_document_inlay_hint_async(
            types.InlayHintParams(
                text_document=types.TextDocumentIdentifier(uri=uri),
                range=types.Range(types.Position(0, 0), types.Position(lines, 0)),
            )
        )
        return {hint.position.line: str(hint.label) for hint in found or []}


class _ForkingServerConfig(ClientServerConfig):  # type: ignore[misc]
    """A language server whose runs fork from this process's fork server, as ``run_cli``'s
    do (it honours SHAPELENS_FORK_SERVER as ``shapelens run`` does): a test pays neither an
    interpreter start nor ``import torch`` per run, nor its server's own fork server."""

    async def start(self, devtools: str | None = None) -> Any:
        self.server_env = {**os.environ, **_fork_server()}
        return await super().start(devtools)


def lsp_fixture(client_name: str, forking: bool = True):  # type: ignore[no-untyped-def]
    """``forking=False``: a server that starts its runs and its fork server itself (tests of
    how a run's process starts)."""
    config = (_ForkingServerConfig if forking else ClientServerConfig)(
        server_command=[sys.executable, "-m", "shapelens", "lsp"]
    )

    @pytest_lsp.fixture(config=config)
    async def fixture(lsp_client: LanguageClient, tmp_path: Path):  # type: ignore[no-untyped-def]
        session = LspSession(lsp_client, tmp_path)

        @lsp_client.feature(TRACE_UPDATED)
        def on_trace_updated(params: Any) -> None:
            session.trace_updates.append(_plain(params))

        @lsp_client.feature(types.WORKSPACE_INLAY_HINT_REFRESH)
        def on_refresh(params: Any) -> None:
            session.refreshes += 1

        session.initialize_result = await lsp_client.initialize_session(
            types.InitializeParams(
                capabilities=client_capabilities(client_name),
                root_uri=tmp_path.as_uri(),
                workspace_folders=[types.WorkspaceFolder(uri=tmp_path.as_uri(), name="ws")],
                initialization_options={"shapelens": {"timeout": 60}},
            )
        )
        lsp_client.shapelens_session = session  # type: ignore[attr-defined]
        yield
        await lsp_client.shutdown_session()

    return fixture


def _plain(value: Any) -> Any:
    """Custom notification params arrive as attrs-like objects: turn them into plain data."""
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if hasattr(value, "_asdict"):  # pygls decodes JSON objects into namedtuples
        return {k: _plain(v) for k, v in value._asdict().items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return {k: _plain(v) for k, v in vars(value).items()}


vscode_client = lsp_fixture("visual-studio-code")
neovim_client = lsp_fixture("neovim")
cold_vscode_client = lsp_fixture("visual-studio-code", forking=False)


@pytest.fixture
def lsp(vscode_client: LanguageClient) -> LspSession:
    """A server driven with VS Code's client capabilities."""
    return vscode_client.shapelens_session  # type: ignore[attr-defined,no-any-return]


@pytest.fixture
def lsp_cold(cold_vscode_client: LanguageClient) -> LspSession:
    """A server that starts its first run cold and then its own fork server."""
    return cold_vscode_client.shapelens_session  # type: ignore[attr-defined,no-any-return]


@pytest.fixture
def lsp_neovim(neovim_client: LanguageClient) -> LspSession:
    """A server driven with Neovim's client capabilities."""
    return neovim_client.shapelens_session  # type: ignore[attr-defined,no-any-return]
