"""The sys.settrace gate (CPython 3.11: tracing off while library code runs) records exactly
what plain sys.settrace records, however control crosses between user and library code:
callbacks, generators both ways, exceptions raised in library code, torch's DataLoader and
nn.Module calling the user's code, threads, the module tree, torch.profiler's profile
function."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from shapelens.engine.backends.library_gate import built_gate, hooked
from shapelens.engine.backends.settrace import Tracer
from shapelens.engine.recording.scope import ScopeConfig
from shapelens.engine.session import engine_for

from conftest import REPO, SAMPLES, line_of, need, normalised_trace, run_cli, same_hits

GATED = sys.implementation.name == "cpython" and sys.version_info[:2] == (3, 11)
needs_gate = pytest.mark.skipif(not GATED, reason="the gate is built for CPython 3.11 only")
NO_GATE = {"SHAPELENS_LIBRARY_GATE": "0"}

LIBRARY = """
import torch

def apply(function, items):
    out = []
    for item in items:
        out.append(function(item))
    return out

def batches(count, width):
    for index in range(count):
        yield torch.ones(index + 1, width)

def drain(iterator):
    total = 0
    for value in iterator:
        total += int(value.shape[0])
    return total

def fail(x):
    inner = x.sum()
    raise ValueError(f"bad {inner.item()}")

def numbers():
    yield 1

def throw_into(generator):
    try:
        generator.throw(KeyError("into the user's generator"))
    except KeyError:
        return "passed through"

def nested(function, x):
    def helper(y):
        return function(y) * 2
    return helper(x)
"""

PROGRAM = """
import threading
import torch
from torch.utils.data import DataLoader, Dataset
import library

class Rows(Dataset):
    def __len__(self):
        return 10

    def __getitem__(self, index):
        row = torch.full((3,), float(index))
        return row

class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(3, 2)

    def forward(self, x):
        hidden = self.fc(x)
        return torch.relu(hidden)

def widen(t):
    wide = torch.cat([t, t], dim=1)
    return wide

def counting(n):
    for k in range(n):
        step = torch.zeros(k + 1, 2)
        yield step

net = Net()
results = library.apply(widen, [torch.ones(2, 2), torch.ones(4, 2)])
shapes = [r.shape for r in results]
for batch in library.batches(3, 5):
    doubled = batch * 2
total = library.drain(counting(4))
try:
    library.fail(torch.ones(2))
except ValueError as error:
    caught = str(error)
try:
    library.numbers().throw(KeyError("into a library generator"))  # before its first line
except KeyError:
    thrown = torch.ones(1)

def unstarted():
    first = yield torch.ones(3)

passed = library.throw_into(unstarted())
twice = library.nested(lambda y: y + 1, torch.ones(6))
for features in DataLoader(Rows(), batch_size=4):
    out = net(features)
worker_out = []
thread = threading.Thread(target=lambda: worker_out.append(widen(torch.ones(1, 7))))
thread.start()
thread.join()
with torch.profiler.profile(with_stack=True):  # a profile function of its own, while tracing
    profiled = torch.ones(5, 5) @ torch.ones(5, 2)
after_profile = profiled.sum(0)

def scaled(t):
    bigger = t * 3
    return bigger.sum(1)

compiled = torch.compile(scaled, backend="eager")  # torch's frame hook in front of ours
first = compiled(torch.ones(2, 3))
second = compiled(torch.ones(2, 3))
after_compile = first + second
a = torch.ones(2, 3)
b = torch.ones(4, 5)
c = a @ b
"""


def _project(tmp_path: Path) -> tuple[Path, Path]:
    project, library = tmp_path / "project", tmp_path / "site"
    project.mkdir()
    library.mkdir()
    (library / "library.py").write_text(textwrap.dedent(LIBRARY))
    main = project / "main.py"
    main.write_text(textwrap.dedent(PROGRAM))
    return project, main


def _traced(project: Path, *, gate: bool, extra: tuple[str, ...] = ()) -> dict[str, Any]:
    env = {"PYTHONPATH": str(project.parent / "site"), **({} if gate else NO_GATE)}
    run = run_cli("--quiet", "--backend", "settrace", *extra, "main.py", cwd=project, env=env)
    assert run.trace is not None, run.stderr
    return run.trace


def _gated_and_plain(project: Path, *extra: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The program traced with the gate and without it: the same trace."""
    gated = _traced(project, gate=True, extra=extra)
    plain = _traced(project, gate=False, extra=extra)
    assert normalised_trace(gated) == normalised_trace(plain)
    return gated, plain


@needs_gate
def test_crossings_between_user_and_library_code_are_all_recorded(tmp_path: Path) -> None:
    """Also with torch.compile kept (``--compile``): dynamo's frame hook chains to the gate,
    and the user lines after compiled calls are traced again."""
    need("torch")
    project, main = _project(tmp_path)
    gated, plain = _gated_and_plain(project, "--modules", "--compile")
    assert gated["modules"] == plain["modules"]

    def line(text: str) -> dict[str, Any]:
        number = line_of(main, text)
        return next(entry for entry in gated["lines"] if entry["line"] == number)

    def var(text: str, name: str) -> dict[str, Any]:
        return next(v for v in line(text)["vars"] if v["name"] == name)

    assert line("wide = torch.cat")["hits"] == 3  # two callbacks and the thread
    assert var("wide = torch.cat", "wide")["shapes"] == [[2, 4], [4, 4], [1, 14]]
    assert line("step = torch.zeros")["hits"] == 4  # a user generator a library drains
    assert var("doubled = batch", "doubled")["shape"] == [3, 5]  # a library generator
    assert line("doubled = batch")["hits"] == 3
    assert line("caught = str")["hits"] == 1  # raised in library code
    assert line("row = torch.full")["hits"] == 10  # torch's DataLoader calls the user
    assert line("hidden = self.fc")["hits"] == 3  # nn.Module calls the user's forward
    assert var("hidden = self.fc", "hidden")["shapes"] == [[4, 2], [2, 2]]
    assert line("twice = library.nested")["hits"] == 1
    assert line("thrown = torch.ones")["hits"] == 1  # gen.throw() into library code
    assert line("passed = library.throw_into")["hits"] == 1  # and into user code
    assert all(e["line"] != line_of(main, "first = yield") for e in gated["lines"])  # unrun
    assert var("profiled = torch.ones", "profiled")["shape"] == [5, 2]  # under torch.profiler
    assert var("after_profile = ", "after_profile")["shape"] == [2]
    assert var("after_compile = ", "after_compile")["shape"] == [2]
    assert gated["status"] == "exception"  # the shape error at the end, explained
    assert [f["kind"] for f in gated["findings"]] == [f["kind"] for f in plain["findings"]]
    assert any(f["line"] == line_of(main, "c = a @ b") for f in gated["findings"])
    assert all(e["line"] != line_of(main, "bigger = t * 3") for e in gated["lines"])  # compiled


@needs_gate
@pytest.mark.parametrize("sample", sorted(p.name for p in SAMPLES.glob("*.py")))
def test_the_samples_trace_the_same_with_the_gate(sample: str, tmp_path: Path) -> None:
    shutil.copy(SAMPLES / sample, tmp_path / sample)
    gated = run_cli("--quiet", "--backend", "settrace", sample, cwd=tmp_path)
    plain = run_cli("--quiet", "--backend", "settrace", sample, cwd=tmp_path, env=NO_GATE)
    assert gated.trace is not None and plain.trace is not None
    assert gated.trace["lines"]
    exact = normalised_trace(plain.trace)  # the gate's hot lines are estimates, said to be
    assert same_hits(normalised_trace(gated.trace), exact) == exact


DEEP = """
import sys
sys.setrecursionlimit(60000)

def down(n):
    if n == 0:
        return 0
    below = down(n - 1)
    return below + 1

depth = down(50000)
"""


@needs_gate
def test_deep_recursion_falls_back_to_plain_settrace(tmp_path: Path) -> None:
    """Under the hook every Python call takes C stack: 50,000 nested calls would overflow
    it (a segfault) where plain sys.settrace, which inlines them, runs fine."""
    main = tmp_path / "main.py"
    main.write_text(DEEP)
    gated = run_cli("--quiet", "--backend", "settrace", "main.py", cwd=tmp_path)
    assert gated.returncode == 0, gated.stderr
    plain = run_cli("--quiet", "--backend", "settrace", "main.py", cwd=tmp_path, env=NO_GATE)
    assert gated.trace is not None and plain.trace is not None
    exact = normalised_trace(plain.trace)
    assert same_hits(normalised_trace(gated.trace), exact) == exact
    below = next(e for e in gated.trace["lines"] if e["line"] == line_of(main, "below = down"))
    assert below["hits"] == 50000


def _tracer(tmp_path: Path) -> Tracer:
    tracer = engine_for(ScopeConfig(root=str(tmp_path)), backend="settrace").backend
    assert isinstance(tracer, Tracer)
    return tracer


@needs_gate
def test_the_gate_is_built_and_restores_what_was_there(tmp_path: Path) -> None:
    assert built_gate() is not None, (
        "the gate was not built: pip install -e . needs a C compiler on CPython 3.11"
    )
    tracer = _tracer(tmp_path)
    with pytest.raises(ZeroDivisionError), tracer:
        assert hooked()  # frames are evaluated through the gate
        _ = 1 / 0
    assert not hooked()
    assert sys.gettrace() is None and sys.getprofile() is None


@needs_gate
def test_a_tracer_already_there_gets_plain_settrace(tmp_path: Path) -> None:
    def theirs(frame: Any, event: str, arg: Any) -> None:
        return None

    sys.settrace(theirs)
    try:
        with _tracer(tmp_path):
            assert not hooked()  # no gate: their tracer is chained as before
        assert sys.gettrace() is theirs
    finally:
        sys.settrace(None)


def test_the_gate_is_built_without_cpython_internals() -> None:
    """No Py_BUILD_CORE (the internal headers need it): the module builds on the public
    headers, and reads the frames it must through a layout it checks when it loads."""
    source = (REPO / "server" / "shapelens" / "engine" / "backends" / "_library_gate.c").read_text()
    code = re.sub(r"/\*.*?\*/|//[^\n]*", "", source, flags=re.DOTALL)  # comments may say why
    assert "Py_BUILD_CORE" not in code
    assert not re.search(r"#\s*include\s*[<\"]internal/", code)


def _python(program: str) -> Any:
    """``program`` in a fresh interpreter (a crash fails this test, not pytest), its stdout
    read as JSON."""
    env = {**os.environ, "PYTHONPATH": str(REPO / "server")}
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(program)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@needs_gate
def test_the_gate_lives_while_a_frame_runs_under_it_after_remove() -> None:
    """User code that removes the gate and drops the last reference to it, while frames run
    under it: the gate (and so the global function it holds) lives until those frames end,
    then goes."""
    program = """
        import json, weakref
        from shapelens.engine.backends._library_gate import Gate

        class Global:
            def __call__(self, frame, event, arg):
                return None

        function = Global()
        alive = weakref.ref(function)
        codes = {}
        gate = Gate(codes, function)
        del function

        def library(callback):
            return callback()

        codes[id(library.__code__)] = None  # library code: tracing off while it runs

        def user():
            global gate
            gate.remove()
            del gate  # the last reference but the running frames'
            return alive() is not None

        gate.install()
        inside = library(user)
        print(json.dumps({"inside": inside, "after": alive() is not None}))
    """
    assert _python(program) == {"inside": True, "after": False}


@needs_gate
def test_the_gate_lives_while_its_trace_function_runs_after_remove() -> None:
    """The same from a trace function (here a frame's local tracer, in a frame the gate's
    hook never evaluated): the gate lives until the call returns."""
    program = """
        import json, sys, weakref
        from shapelens.engine.backends._library_gate import Gate

        class Codes(dict):
            pass

        codes = Codes()
        alive = weakref.ref(codes)
        gate = Gate(codes, lambda frame, event, arg: None)
        del codes
        seen = {}

        def local(frame, event, arg):
            global gate
            if "inside" not in seen:
                gate.remove()
                del gate  # the last reference but the running trace function's
                seen["inside"] = alive() is not None
            return None

        sys._getframe().f_trace = local
        gate.install()
        seen["after"] = alive() is not None
        sys._getframe().f_trace = None
        print(json.dumps(seen))
    """
    assert _python(program) == {"inside": True, "after": False}


AFTER_AN_ERROR = textwrap.dedent(
    """
    import json, sys

    seen = []

    def local(frame, event, arg):
        seen.append([frame.f_code.co_name, event])
        if frame.f_code.co_name == "failing" and event == "line":
            raise RuntimeError("the trace function fails")
        return local

    def global_function(frame, event, arg):
        seen.append([frame.f_code.co_name, event])
        return local

    def failing():
        x = 1
        return x

    def after():
        y = 2
        return y

    def main():
        try:
            failing()
        except RuntimeError:
            pass
        left = sys.gettrace()
        after()
        return left

    {install}
    left = main()
    print(json.dumps({{"seen": seen, "left": repr(left), "now": repr(sys.gettrace())}}))
    """
)


@needs_gate
def test_after_a_trace_function_error_tracing_stays_off_as_with_settrace() -> None:
    plain = _python(AFTER_AN_ERROR.format(install="sys.settrace(global_function)"))
    gate = (
        "from shapelens.engine.backends._library_gate import Gate\n"
        "Gate({}, global_function).install()"
    )
    gated = _python(AFTER_AN_ERROR.format(install=gate))
    assert plain["seen"] == [["main", "call"], ["main", "line"], ["main", "line"],
                             ["failing", "call"], ["failing", "line"]]  # fmt: skip
    assert plain["left"] == plain["now"] == "None"
    assert gated == plain


@needs_gate
def test_lines_switched_off_get_no_event_until_all_are_switched_on() -> None:
    """The gate's switch: a line switched off reaches no trace function (in any frame of its
    code) until ``switch_all_on()``; the other lines keep theirs; a line the code does not
    have is refused; a new gate starts with every line on."""
    program = """
        import json, sys
        from shapelens.engine.backends._library_gate import Gate

        seen = []

        def local(frame, event, arg):
            if event == "line":
                seen.append(frame.f_lineno - frame.f_code.co_firstlineno)
            return local

        def global_function(frame, event, arg):
            return local if frame.f_code is body.__code__ else None

        def body(n):
            total = 0
            for i in range(n):
                total += i
            return total

        def run(gate):
            seen.clear()
            gate.install()
            body(2)
            gate.remove()
            return list(seen)

        first = Gate({}, global_function)
        all_lines = run(first)
        refused = [first.switch_off(body.__code__, n) for n in (0, 10_000)]
        off = first.switch_off(body.__code__, body.__code__.co_firstlineno + 3)
        without = run(first)
        first.switch_all_on()
        again = run(first)
        first.switch_off(body.__code__, body.__code__.co_firstlineno + 3)
        fresh = run(Gate({}, global_function))
        print(json.dumps([all_lines, refused, off, without, again, fresh]))
    """
    every = [1, 2, 3, 2, 3, 2, 4]
    assert _python(program) == [every, [False, False], True, [1, 2, 2, 2, 4], every, every]


def test_a_hot_loop_under_the_gate_stops_recording_its_body_once_estimated(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Switched off in C once their hits can be estimated, a hot loop's body lines stop
    reaching the recorder: its header alone counts each iteration. Plain sys.settrace
    reports every line, and counts each hit exactly. Both show the same counts."""
    (tmp_path / "hot.py").write_text(
        "def hot(n):\n"
        "    total = 0\n"
        "    for i in range(n):\n"
        "        total += i\n"
        "        twice = total * 2\n"
        "    return twice\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "hot", raising=False)
    import hot  # type: ignore[import-not-found]

    def traced(gate: str) -> tuple[dict[str, int], dict[int, int], set[int]]:
        monkeypatch.setenv("SHAPELENS_LIBRARY_GATE", gate)
        built = engine_for(ScopeConfig(root=str(tmp_path)), backend="settrace")
        recorder, calls = built.recorder, {"started": 0, "iterated": 0}
        started, iterated = recorder.statement_started, recorder.loop_iterated

        def counted(name: str, function: Any) -> Any:
            def call(*args: Any) -> Any:
                calls[name] += 1
                return function(*args)

            return call

        recorder.statement_started = counted("started", started)
        recorder.loop_iterated = counted("iterated", iterated)
        with built.backend:
            assert hot.hot(20_000) == 2 * sum(range(20_000))
        file = str(tmp_path / "hot.py")
        hits = {line: built.records.hits_now(file, line) for line in (3, 4, 5)}
        return calls, hits, set(built.records.sampled.get(file, ()))

    plain_calls, plain_hits, exact = traced("0")
    assert plain_calls["started"] >= 3 * 20_000 and plain_calls["iterated"] == 0
    assert plain_hits == {3: 20_001, 4: 20_000, 5: 20_000} and exact == set()
    if not GATED:
        return
    gated_calls, gated_hits, estimated = traced("1")
    assert gated_calls["started"] < 1_000  # the dense first hits, and re-arms
    assert gated_calls["iterated"] > 19_000
    assert estimated == {4, 5}
    assert gated_hits[3] == 20_001  # the header is counted, never estimated
    for line in (4, 5):
        assert abs(gated_hits[line] - 20_000) <= 20_000 * 0.005, gated_hits
