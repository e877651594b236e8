"""The channel's messages: the child's constructors and the parent's builder share one
vocabulary, and the frames keep their keys (rank files written earlier still merge)."""

from __future__ import annotations

import os

from shapelens.runner.protocol import FrameReader, FrameWriter
from shapelens.trace import messages
from shapelens.trace.builder import TraceBuilder


def test_messages_keep_their_wire_keys() -> None:
    assert messages.hello(python="3.12.1", pid=7) == {"t": "hello", "python": "3.12.1", "pid": 7}
    assert messages.lines([["a.py", 3, 2]]) == {"t": "lines", "entries": [["a.py", 3, 2]]}
    assert messages.compile_mode("eager") == {"t": "compile", "mode": "eager"}
    assert messages.debug(host="127.0.0.1", port=5678) == {
        "t": "debug",
        "host": "127.0.0.1",
        "port": 5678,
    }
    assert messages.error("no such file") == {"t": "error", "message": "no such file"}
    assert messages.stopped() == {"t": "stopped"}
    assert messages.end(status="ok", exit_code=0, exception=None, ended_at=1.5) == {
        "t": "end",
        "status": "ok",
        "exit_code": 0,
        "exception": None,
        "ended_at": 1.5,
    }


def test_what_the_child_sends_the_builder_reads() -> None:
    var = ["a.py", 3, "x", "Tensor", [2, 3], "float32", "cpu", True, 3, [[2, 3], [2, 1]]]
    var += [None, [[2, 2], [1, 3]], None, None, [2, 1], True]
    assert len(var) == len(messages.VAR_FIELDS)
    loss = [
        "a.py",
        3,
        "loss",
        "float",
        None,
        None,
        None,
        None,
        2,
        [],
        None,
        None,
        ["nan", 0.5, "inf"],
        [0.5, "nan"],
        None,
        False,
    ]
    sent: list[messages.Message] = [
        messages.hello(python="3.12.1", pid=7),
        messages.lines([["a.py", 3, 2]]),
        messages.vars_([var, loss]),
        messages.sampled([["a.py", 3]]),
        messages.compile_mode("eager"),
        messages.stopped(),
        messages.end(
            status="exception",
            exit_code=1,
            exception={"type": "ValueError", "message": "bad", "file": "a.py", "line": 3},
            ended_at=1.5,
        ),
    ]
    read_fd, write_fd = os.pipe()
    writer = FrameWriter(write_fd)
    for message in sent:
        writer.send(message)
    os.close(write_fd)
    with os.fdopen(read_fd, "rb") as channel:
        received = list(FrameReader().feed(channel.read()))
    assert received == sent
    builder = TraceBuilder(argv=["a.py"])
    for message in received:
        builder.accept(message)
    trace = builder.build(duration_s=0.1, returncode=1, outcome=None)
    assert builder.stopped and builder.take_changed()
    assert (trace.python, trace.status, trace.exit_code, trace.compile_mode) == (
        "3.12.1",
        "exception",
        1,
        "eager",
    )
    (line,) = trace.lines
    assert (line.file, line.line, line.hits, line.sampled) == ("a.py", 3, 2, True)
    assert [(v.name, v.shape, v.dtype) for v in line.vars] == [
        ("x", (2, 3), "float32"),
        ("loss", None, None),
    ]
    x = line.vars[0]
    assert (x.shapes, x.shape_hits, x.grad_varied) == (((2, 3), (2, 1)), (2, 1), True)
    assert (line.vars[1].shape_hits, line.vars[1].grad_varied) == ((), False)
    last, low, high = line.vars[1].number or (0.0, 0.0, 0.0)
    assert last != last and (low, high) == (0.5, float("inf"))  # NaN and Inf survive JSON
    first, latest = line.vars[1].history
    assert first == 0.5 and latest != latest
    assert trace.exception is not None and trace.exception.type == "ValueError"
