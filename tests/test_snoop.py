"""``from shapelens import snoop``: torchsnooper's API and log format, without its breakages."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from conftest import need

pytestmark = pytest.mark.backend

torch = need("torch")
import numpy as np  # noqa: E402

from shapelens import NumpyFormat, TensorFormat, register_snoop, snoop  # noqa: E402


class Log:
    """Collects what the snooper writes, with timestamps normalised as pysnooper's tests do."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def __call__(self, text: str) -> None:
        self.lines.extend(text.rstrip("\n").split("\n"))

    def normalised(self) -> list[str]:
        out = []
        for line in self.lines:
            line = re.sub(r"^\d\d:\d\d:\d\d\.\d{6} (\w+) +\d+ ", r"TIME \1 N ", line)
            out.append(re.sub(r"\d\d:\d\d:\d\d\.\d{6}$", "ELAPSED", line))
        return out


def test_function_log_matches_torchsnooper_format() -> None:
    log = Log()

    @snoop(output=log, color=False)
    def myfunc(mask: Any, x: Any) -> Any:
        y = torch.zeros(6)
        y.masked_scatter_(mask.bool(), x)
        return y

    myfunc(torch.tensor([0, 1, 0, 1, 1, 0]), torch.tensor([1.0, 2.0, 3.0]))
    assert log.normalised() == [
        f"Source path:... {__file__}",
        "Starting var:.. mask = tensor<(6,), int64, cpu>",
        "Starting var:.. x = tensor<(3,), float32, cpu>",
        "TIME call N     def myfunc(mask: Any, x: Any) -> Any:",
        "TIME line N         y = torch.zeros(6)",
        "New var:....... y = tensor<(6,), float32, cpu>",
        "TIME line N         y.masked_scatter_(mask.bool(), x)",
        "TIME line N         return y",  # masked_scatter_ changed data, not metadata
        "TIME return N         return y",
        "Return value:.. tensor<(6,), float32, cpu>",
        "Elapsed time: ELAPSED",
    ]


def test_with_block_and_loop() -> None:
    log = Log()
    model = torch.nn.Linear(2, 1)
    x = torch.zeros(4, 2)
    y = torch.zeros(4)
    with snoop(output=log, color=False):
        for _ in range(2):
            pred = model(x)
            squared_diff = (y - pred) ** 2
    text = "\n".join(log.normalised())
    assert "New var:....... pred = tensor<(4, 1), float32, cpu, grad>" in text
    assert "New var:....... squared_diff = tensor<(4, 4), float32, cpu, grad>" in text
    assert text.count("squared_diff = (y - pred) ** 2") == 2
    assert squared_diff.shape == (4, 4)


def test_class_decorator_traces_methods() -> None:
    log = Log()

    @snoop(output=log, color=False)
    class Block(torch.nn.Module):
        def forward(self, x: Any) -> Any:
            doubled = x * 2
            return doubled

    Block()(torch.ones(3))
    assert "New var:....... doubled = tensor<(3,), float32, cpu>" in "\n".join(log.lines)


def test_formats() -> None:
    fmt = TensorFormat()
    assert fmt(torch.zeros(5, 8, requires_grad=True)) == "tensor<(5, 8), float32, cpu, grad>"
    assert fmt(torch.tensor([1.0, float("nan")])) == "tensor<(2,), float32, cpu, has_nan>"
    assert fmt(torch.tensor([1.0, float("inf")])) == "tensor<(2,), float32, cpu, has_inf>"
    assert fmt(torch.tensor([3.0e38, 3.0e38])) == "tensor<(2,), float32, cpu>"  # sum overflows only
    assert (
        fmt(torch.empty(10**6, 10**6, device="meta")) == "tensor<(1000000, 1000000), float32, meta>"
    )
    assert fmt(torch.eye(3).to_sparse()) == "tensor<(3, 3), float32, cpu>"
    nested = torch.nested.nested_tensor([torch.zeros(2), torch.zeros(3)])
    assert fmt(nested) == "tensor<(?), float32, cpu>"
    named = TensorFormat(
        property_name=True, properties=("shape", "dtype", "requires_grad", "has_nan")
    )
    assert (
        named(torch.zeros(2))
        == "tensor<shape=(2,), dtype=float32, requires_grad=False, has_nan=False>"
    )
    # bounded scan: too big or not on the CPU is not scanned, and says so
    small_limit = TensorFormat(
        property_name=True, properties=("has_nan",), nonfinite_max_elements=4
    )
    assert small_limit(torch.zeros(10)) == "tensor<has_nan=?>"
    assert named(torch.zeros(2, device="meta")).endswith("has_nan=?>")

    class NamedDims:  # torch >= 2.13 dropped named tensors; the format still supports them
        shape = (5, 8)
        names = ("A", None)
        dtype = torch.float32
        device = torch.device("cpu")
        requires_grad = False

    assert TensorFormat(properties=("shape",))(NamedDims()) == "tensor<(A=5, 8)>"
    assert NumpyFormat()(np.zeros((2, 2))) == "ndarray<(2, 2), float64>"
    with pytest.raises(ValueError, match="Unknown tensor property"):
        TensorFormat(properties=("shape", "colour"))


def test_containers_and_return_types_never_crash() -> None:
    log = Log()

    @snoop(output=log, color=False)
    def work() -> None:
        mm = torch.aminmax(torch.arange(5.0))
        top = torch.randn(6).topk(2)
        batch = {"image": torch.zeros(2, 3), "ids": [torch.ones(2, dtype=torch.int64)], "n": 3}
        arr = np.ones((2, 2), dtype=np.float32)
        meta = torch.empty(3, device="meta")
        del mm, top, batch, arr, meta

    with _no_warnings():  # torchsnooper warns on (and crashes for) unknown return types
        work()
    text = "\n".join(log.lines)
    assert "mm = aminmax(min=tensor<(), float32, cpu>, max=tensor<(), float32, cpu>)" in text
    assert "top = topk(values=tensor<(2,), float32, cpu>, indices=tensor<(2,), int64, cpu>)" in text
    assert (
        "batch = {'image': tensor<(2, 3), float32, cpu>, 'ids': [tensor<(2,), int64, cpu>], 'n': 3}"
        in text
    )
    assert "arr = ndarray<(2, 2), float32>" in text
    assert "meta = tensor<(3,), float32, meta>" in text
    assert "REPR FAILED" not in text


class _no_warnings:
    def __enter__(self) -> None:
        import warnings

        self._catch = warnings.catch_warnings()
        self._catch.__enter__()
        warnings.simplefilter("error")

    def __exit__(self, *exc: object) -> None:
        self._catch.__exit__(*exc)


def test_settrace_is_restored() -> None:
    assert sys.gettrace() is None

    @snoop(output=Log(), color=False)
    def f() -> int:
        return 1

    f()
    with snoop(output=Log(), color=False):
        pass
    assert sys.gettrace() is None


def test_imports_without_pkg_resources() -> None:
    done = subprocess.run(
        [sys.executable, "-c",
         "import sys; sys.modules['pkg_resources'] = None\n"
         "from shapelens import snoop, TensorFormat, NumpyFormat, register_snoop\nprint('ok')"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.stdout.strip() == "ok", done.stderr


def test_register_snoop_formats_tensors_in_snoop() -> None:
    import snoop as snoop_library

    register_snoop()
    out: list[str] = []
    config = snoop_library.Config(out=out.append, color=False, columns=())

    @config.snoop()
    def f() -> None:
        grid = torch.zeros(3, 4)  # noqa: F841

    f()
    assert any("grid = tensor<(3, 4), float32, cpu>" in line for line in "".join(out).splitlines())


def test_shapelens_trace_env_writes_a_trace(tmp_path: Path) -> None:
    script = tmp_path / "remote.py"
    script.write_text(
        textwrap.dedent(
            """
            import torch
            from shapelens import snoop

            @snoop(output=None, color=False)
            def step(x):
                h = x @ x.T
                return h

            for _ in range(3):
                step(torch.ones(4, 2))
            """
        )
    )
    trace_path = tmp_path / "trace.json"
    done = subprocess.run(
        [sys.executable, str(script)],
        env={**__import__("os").environ, "SHAPELENS_TRACE": str(trace_path)},
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "h = tensor<(4, 4), float32, cpu>" in done.stderr  # the log as usual
    trace = json.loads(trace_path.read_text())
    h = next(v for line in trace["lines"] for v in line["vars"] if v["name"] == "h")
    assert (h["shape"], h["hits"]) == ([4, 4], 3)
    assert trace["schema"] == "shapelens.trace/2"


def test_run_log_writes_the_whole_run(tmp_path: Path) -> None:
    from conftest import run_cli

    (tmp_path / "helper.py").write_text(
        "import torch\ndef make():\n    made = torch.ones(2, 2)\n    return made\n"
    )
    (tmp_path / "main.py").write_text("import helper\nresult = helper.make()\n")
    run = run_cli("--quiet", "--log", "run.log", "main.py", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    log = (tmp_path / "run.log").read_text()
    assert "New var:....... made = tensor<(2, 2), float32, cpu>" in log
    assert "New var:....... result = tensor<(2, 2), float32, cpu>" in log
    assert "__builtins__" not in log
    assert run.trace is not None and run.var(tmp_path / "main.py", 2, "result")["shape"] == [2, 2]
    # `--log SCRIPT`: the log goes to stderr
    to_stderr = run_cli("--quiet", "--log", "main.py", cwd=tmp_path)
    assert "made = tensor<(2, 2), float32, cpu>" in to_stderr.stderr
