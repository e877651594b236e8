"""``%load_ext shapelens`` in a real Jupyter kernel (ipykernel, driven by nbclient), and
``%%shapelens`` in terminal IPython: cells traced in the kernel's process, one trace file per
kernel session, rewritten after each cell, with each cell's text."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from shapelens.trace.codec import load_trace

from conftest import line_of, need, run_cli

pytestmark = pytest.mark.backend

nbformat = need("nbformat")
nbclient = need("nbclient")
jupyter_client = need("jupyter_client")
need("torch")

SCHEMA = Path(__file__).resolve().parents[1] / "server" / "shapelens" / "trace" / "schema.json"

HELPERS = """\
import torch


def project(x, out_features):
    weight = torch.ones(x.shape[-1], out_features)
    return x @ weight
"""

CELLS = {
    "load": "%load_ext shapelens",
    "data": "import torch\nfrom helpers import project\nx = torch.ones(4, 3)",
    "define": "def double(t):\n    y = t * 2\n    return y",
    "loop": "for i in range(5):\n    z = double(x[: i + 1])\nh = project(x, 7)",
    "fail": "bad = x @ torch.ones(5, 2)",
    "magic": "%%shapelens\nw = torch.zeros(2, 3)\nv = w.sum(0)",
    "pick": (
        "def pick(t, big):\n    if big:\n        out = t * 2\n    else:\n        out = t[:1]\n"
        "    return out"
    ),
    "big": "p = pick(x, True)",
    "small": "p = pick(x, False)",
    "off": "%shapelens off",
    "untraced": "quiet = torch.ones(9)",
    "on": "%shapelens on",
    "status": "%shapelens status",
    "compile_model": (
        "from torch import nn\n\n\nclass Tiny(nn.Module):\n    def __init__(self):\n"
        "        super().__init__()\n        self.fc = nn.Linear(3, 2)\n\n"
        "    def forward(self, x):\n        h = self.fc(x)\n        out = torch.relu(h)\n"
        '        return out\n\n\nmodel = torch.compile(Tiny(), backend="eager")'
    ),
    "compile_train": (
        "opt = torch.optim.SGD(model.parameters(), lr=0.1)\nfor step in range(3):\n"
        "    pred = model(torch.ones(4, 3))\n    loss = pred.sum()\n    opt.zero_grad()\n"
        "    loss.backward()\n    opt.step()"
    ),
    "probe": "print(hasattr(torch.compile, '__shapelens__'))",
}


class Session:
    """One kernel: cells executed in the order a user chose, their outputs kept."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.notebook = nbformat.v4.new_notebook()
        self.notebook.cells = [nbformat.v4.new_code_cell(text) for text in CELLS.values()]
        self.index = {name: i for i, name in enumerate(CELLS)}
        # Over Unix sockets, not TCP: a kernel's ports are chosen before it binds them, and a
        # test running beside it (a debug run's adapter) could take one in between.
        # Its connection file in the test's folder too (else one more tmp*.json in /tmp).
        manager = jupyter_client.KernelManager(
            kernel_name="python3",
            transport="ipc",
            ip=str(folder / "kernel-ipc"),
            connection_file=str(folder / "kernel.json"),
        )
        self.client = nbclient.NotebookClient(
            self.notebook,
            km=manager,
            timeout=180,
            allow_errors=True,
            resources={"metadata": {"path": str(folder)}},
        )
        self.outputs: dict[str, list[dict[str, Any]]] = {}

    def run(self, name: str, source: str | None = None) -> list[dict[str, Any]]:
        cell = self.notebook.cells[self.index[name]]
        if source is not None:
            cell.source = source
        self.client.execute_cell(cell, self.index[name])
        self.outputs[name] = [dict(o) for o in cell.outputs]
        return self.outputs[name]

    def trace_files(self) -> list[Path]:
        return sorted((self.folder / ".shapelens").glob("kernel-*.json"))

    def trace(self) -> dict[str, Any]:
        (only,) = self.trace_files()
        data: dict[str, Any] = json.loads(only.read_text())
        return data


def _cell(trace: dict[str, Any], source: str) -> dict[str, Any]:
    return next(c for c in trace["cells"] if c["source"] == source)


def _vars(trace: dict[str, Any], file: str) -> dict[tuple[int, str], dict[str, Any]]:
    return {
        (line["line"], var["name"]): {**var, "line_hits": line["hits"]}
        for line in trace["lines"]
        if line["file"] == file
        for var in line["vars"]
    }


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Session]:
    folder = tmp_path_factory.mktemp("notebook")
    (folder / "helpers.py").write_text(HELPERS)
    kernel = Session(folder)
    old = os.environ.pop("SHAPELENS_TRACE_DIR", None)
    try:
        with kernel.client.setup_kernel():
            kernel.run("load")
            # Out of order: the function cell after the data cell that uses it later.
            kernel.run("define")
            kernel.run("data")
            kernel.run("loop")
            kernel.snapshots = [kernel.trace()]  # type: ignore[attr-defined]
            kernel.run("fail")
            # Re-executed, edited: the data cell now makes another shape.
            kernel.run("data", "import torch\nfrom helpers import project\nx = torch.ones(6, 3)")
            kernel.run("loop")
            kernel.run("magic")
            kernel.run("pick")
            kernel.run("big")
            kernel.run("small")  # runs the other branch: the first one's hint stays
            kernel.run("off")
            kernel.run("untraced")
            kernel.run("on")
            kernel.run("status")
            kernel.run("compile_model")
            kernel.run("compile_train")
            kernel.snapshots.append(kernel.trace())  # type: ignore[attr-defined]
            kernel.run("off")
            kernel.run("probe")  # untraced: torch.compile is torch's own again
            kernel.run("on")
            yield kernel
    finally:
        if old is not None:
            os.environ["SHAPELENS_TRACE_DIR"] = old


def test_one_trace_file_per_session_valid_and_rewritten_after_each_cell(session: Session) -> None:
    jsonschema = need("jsonschema")
    (path,) = session.trace_files()
    assert path.name.startswith("kernel-")
    trace = session.trace()
    jsonschema.validate(trace, json.loads(SCHEMA.read_text()))
    assert load_trace(path).cells  # the model reads it back
    first = session.snapshots[0]  # type: ignore[attr-defined]
    # After the loop cell, the file already had it: it is written after every cell.
    assert _cell(first, CELLS["loop"])["execution_count"] is not None
    assert {c["source"] for c in first["cells"]} >= {CELLS["define"], CELLS["loop"]}


def test_cells_out_of_order_and_re_executed_follow_the_latest_execution(session: Session) -> None:
    trace = session.trace()
    edited = _cell(trace, "import torch\nfrom helpers import project\nx = torch.ones(6, 3)")
    assert _vars(trace, edited["file"])[(3, "x")]["shape"] == [6, 3]
    # The function's cell shows what its latest caller gave it: t up to (6,3) now.
    define = _cell(trace, CELLS["define"])
    y = _vars(trace, define["file"])[(2, "y")]
    assert y["hits"] == 5 and y["shape"] == [5, 3] and y["dim_ranges"] == [[1, 5], [3, 3]]
    loop = _cell(trace, CELLS["loop"])
    loop_vars = _vars(trace, loop["file"])
    assert loop_vars[(2, "z")]["hits"] == 5
    assert loop_vars[(3, "h")]["shape"] == [6, 7]
    # A user module the cells import is user code too.
    helpers = str(session.folder / "helpers.py")
    assert _vars(trace, os.path.realpath(helpers))[(5, "weight")]["shape"] == [3, 7]
    # Each cell once, its latest execution; the loop ran twice and is listed after the edit.
    files = [c["file"] for c in trace["cells"]]
    assert len(files) == len(set(files))
    order = [c["source"] for c in trace["cells"]]
    assert order.index(CELLS["loop"]) > order.index(edited["source"])
    assert loop["execution_count"] > edited["execution_count"]


def test_a_later_call_that_ran_fewer_lines_keeps_the_others(session: Session) -> None:
    trace = session.trace()
    pick = _vars(trace, _cell(trace, CELLS["pick"])["file"])
    assert pick[(3, "out")]["shape"] == [6, 3]  # `big` ran this branch, `small` did not
    assert pick[(5, "out")]["shape"] == [1, 3]
    assert pick[(6, "<return>")]["shape"] == [1, 3]  # the latest call's return


def test_a_failing_cell_fails_as_without_shapelens_and_is_in_the_trace(session: Session) -> None:
    (error,) = [o for o in session.outputs["fail"] if o["output_type"] == "error"]
    assert error["ename"] == "RuntimeError"
    assert error["evalue"] == "mat1 and mat2 shapes cannot be multiplied (6x3 and 5x2)" or (
        error["evalue"] == "mat1 and mat2 shapes cannot be multiplied (4x3 and 5x2)"
    )
    assert not any("shapelens" in line for line in error["traceback"]), error["traceback"]
    trace = session.trace()
    failed = _cell(trace, CELLS["fail"])
    assert trace["status"] == "exception"
    assert trace["exception"]["file"] == failed["file"] and trace["exception"]["line"] == 1
    assert trace["exception"]["type"] == "RuntimeError"
    # Explained as in a script run: the operand and the line that made it.
    (mismatch,) = [f for f in trace["findings"] if f["file"] == failed["file"]]
    assert mismatch["kind"] == "shape_mismatch" and mismatch["line"] == 1


def test_shapelens_cell_magic_shows_the_listing_as_html_and_text(session: Session) -> None:
    (shown,) = [o for o in session.outputs["magic"] if o["output_type"] == "display_data"]
    page, text = shown["data"]["text/html"], shown["data"]["text/plain"]
    assert page.startswith('<pre class="shapelens-listing"') and "<span style=" in page
    assert "w (2,3)" in page and "v (3,)" in page
    lines = text.splitlines()
    assert lines[1].split("│")[1].strip() == "%%shapelens"  # the cell as the user wrote it
    assert any(
        line.startswith("  2 │ w = torch.zeros(2, 3)") and "w (2,3)" in line for line in lines
    )
    trace = session.trace()
    magic = _cell(trace, CELLS["magic"])
    assert _vars(trace, magic["file"])[(3, "v")]["shape"] == [3]


def test_off_on_and_status(session: Session) -> None:
    trace = session.trace()
    sources = {c["source"] for c in trace["cells"]}
    assert CELLS["untraced"] not in sources  # ran while off
    assert CELLS["status"] in sources  # traced again after on
    (printed,) = [o["text"] for o in session.outputs["status"] if o["output_type"] == "stream"]
    assert printed.startswith("ShapeLens on") and str(session.trace_files()[0]) in printed


def test_a_compiled_model_in_a_cell_runs_as_in_a_script(session: Session, tmp_path: Path) -> None:
    """The cell's engine is the script's: ``torch.compile`` regions run eagerly, with the same
    hints as the same code run as a script, and torch.compile is torch's own again after."""
    model_cell, train_cell = CELLS["compile_model"], CELLS["compile_train"]
    main = tmp_path / "main.py"
    main.write_text(f"import torch\n{model_cell}\n{train_cell}\n")
    script = run_cli("main.py", cwd=tmp_path)
    assert script.returncode == 0 and script.trace is not None, script.stderr
    trace = session.snapshots[-1]  # type: ignore[attr-defined]
    cell = _vars(trace, _cell(trace, model_cell)["file"])
    assert trace["compile"] == script.trace["compile"] == "eager"
    for marker, name in [("h = self.fc", "h"), ("out = torch.relu", "out"), ("def forward", "x")]:
        in_cell = cell[(_line(model_cell, marker), name)]
        in_script = script.var(main, line_of(main, marker), name)
        assert (in_cell["shape"], in_cell["hits"]) == (in_script["shape"], in_script["hits"])
        assert in_cell["hits"] == 3, (marker, in_cell)
    for name in ("compile_model", "compile_train"):
        shown = "".join(str(o) for o in session.outputs[name])
        assert "Graph break" not in shown and "shapelens" not in shown.lower(), shown
    (printed,) = [o["text"] for o in session.outputs["probe"] if o["output_type"] == "stream"]
    assert printed.strip() == "False"


def _line(source: str, marker: str) -> int:
    return next(n for n, text in enumerate(source.splitlines(), 1) if marker in text)


def test_clear_and_the_trace_dir_variable(tmp_path: Path) -> None:
    target = tmp_path / "traces"
    os.environ["SHAPELENS_TRACE_DIR"] = str(target)
    try:
        kernel = Session(tmp_path)
        with kernel.client.setup_kernel():
            kernel.run("load")
            kernel.run("untraced")
            (path,) = sorted(target.glob("kernel-*.json"))
            assert _cell(json.loads(path.read_text()), CELLS["untraced"])
            kernel.run("status", "%shapelens clear")
            cleared = json.loads(path.read_text())
            assert cleared.get("cells", []) == [] and cleared["lines"] == []
    finally:
        del os.environ["SHAPELENS_TRACE_DIR"]
    assert not (tmp_path / ".shapelens").exists()


def test_terminal_ipython_shows_the_listing_as_plain_text(tmp_path: Path) -> None:
    script = textwrap.dedent(
        """
        from IPython.terminal.interactiveshell import TerminalInteractiveShell
        shell = TerminalInteractiveShell.instance()
        shell.run_cell("%load_ext shapelens")
        shell.run_cell("import torch\\nx = torch.ones(2, 5)")
        shell.run_cell("%%shapelens\\ny = x.T\\nz = y @ x")
        failed = shell.run_cell("%%shapelens\\nq = x @ x")
        print("error:", type(failed.error_in_exec).__name__)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "TERM": "dumb"},
    )
    out = done.stdout
    assert "<pre" not in out and "<span" not in out
    assert "y (5,2)" in out and "z (5,5)" in out
    assert "mat1 and mat2 shapes cannot be multiplied (2x5 and 2x5)" in out
    # The finding reads the cell's code, not its %%shapelens line: it explains the operands.
    assert "✖ shape_mismatch:" in out and "`x` created here" in out
    assert "error: RuntimeError" in out
    (path,) = sorted((tmp_path / ".shapelens").glob("kernel-*.json"))
    cells = json.loads(path.read_text())["cells"]
    assert [c["file"].startswith("<ipython-input-") for c in cells] == [True, True, True]


def test_a_trace_folder_that_cannot_be_written_never_fails_a_cell(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from shapelens.notebook.session import KernelSession

    blocked = tmp_path / "not-a-folder"
    blocked.write_text("a file where the trace folder should be")
    session = KernelSession(cwd=str(tmp_path), cell_files=["<cell-*"], trace_dir=str(blocked))
    code = compile("y = [1, 2, 3]\n", "<cell-1>", "exec")
    for _ in range(2):
        session.begin()
        exec(code, {})
        run = session.end(file="<cell-1>", source="y = [1, 2, 3]\n", execution_count=1, error=None)
        assert run is not None and run.trace.status == "ok"
    warned = capsys.readouterr().err
    assert warned.count("ShapeLens: cannot write") == 1 and "SHAPELENS_TRACE_DIR" in warned
    assert session.cells_traced == 2
