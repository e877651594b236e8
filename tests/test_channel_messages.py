"""The channel's messages: the child's constructors and the parent's builder share one
vocabulary, and the frames keep their keys (rank files written earlier still merge)."""

from __future__ import annotations

import json
import os

from shapelens.runner.protocol import FrameReader, FrameWriter
from shapelens.trace import messages
from shapelens.trace.builder import TraceBuilder
from shapelens.trace.messages import LineRecord, SampledRecord, VarRecord
from shapelens.trace.model import TracingCore


def test_messages_keep_their_wire_keys() -> None:
    hello = messages.hello(python="3.12.1", pid=7, core="settrace", gate_off="not 3.11")
    assert hello == {
        "t": "hello",
        "python": "3.12.1",
        "pid": 7,
        "core": "settrace",
        "gate_off": "not 3.11",
    }
    assert _wire(messages.lines([LineRecord("a.py", 3, 2)])) == {
        "t": "lines",
        "entries": [["a.py", 3, 2]],
    }
    assert _wire(messages.sampled([SampledRecord("a.py", 3)])) == {
        "t": "sampled",
        "entries": [["a.py", 3]],
    }
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


def _wire(message: messages.Message) -> object:
    """What the channel carries: records become JSON arrays."""
    return json.loads(json.dumps(message))


def test_a_record_is_an_array_in_its_fields_order() -> None:
    """The order is the wire format: rank files written earlier are read by it."""
    assert VarRecord._fields == (
        "file", "line", "name", "type", "shape", "dtype", "device", "requires_grad", "hits",
        "shapes", "grad_fn", "dim_ranges", "number", "history", "shape_hits", "grad_varied",
        "bounded_dims", "sharding",
    )  # fmt: skip
    assert LineRecord._fields == ("file", "line", "hits")
    assert SampledRecord._fields == ("file", "line")


def test_an_older_or_newer_childs_var_is_read_by_name() -> None:
    """A child of an older ShapeLens sent 11 fields; a newer one may send more than we know."""
    older = ["a.py", 3, "x", "Tensor", [2, 3], "float32", "cpu", False, 4, [[2, 3]], None]
    newer = [*older, None, None, None, None, True, [0], ["Shard(0)", [1, 3]], "a field of tomorrow"]
    builder = TraceBuilder(argv=["a.py"])
    builder.accept({"t": "vars", "entries": [older, [*newer[:2], "y", *newer[3:]]]})
    (line,) = builder.build(duration_s=0.1, returncode=0, outcome=None).lines
    x, y = line.vars
    assert (x.name, x.hits, x.dim_ranges, x.grad_varied) == ("x", 4, None, False)
    assert (y.name, y.shape, y.grad_varied, y.bounded_dims) == ("y", (2, 3), True, (0,))
    assert (y.placements, y.local_shape, x.placements) == ("Shard(0)", (1, 3), None)


def test_what_the_child_sends_the_builder_reads() -> None:
    var = VarRecord(
        file="a.py",
        line=3,
        name="x",
        type="Tensor",
        shape=[2, 3],
        dtype="float32",
        device="cpu",
        requires_grad=True,
        hits=3,
        shapes=[[2, 3], [2, 1]],
        grad_fn=None,
        dim_ranges=[[2, 2], [1, 3]],
        shape_hits=[2, 1],
        grad_varied=True,
    )
    loss = VarRecord(
        file="a.py",
        line=3,
        name="loss",
        type="float",
        shape=None,
        dtype=None,
        device=None,
        requires_grad=None,
        hits=2,
        shapes=[],
        grad_fn=None,
        number=["nan", 0.5, "inf"],
        history=[0.5, "nan"],
    )
    sent: list[messages.Message] = [
        messages.hello(python="3.12.1", pid=7, core="monitoring", gate_off=None),
        messages.lines([LineRecord("a.py", 3, 2)]),
        messages.vars_([var, loss]),
        messages.sampled([SampledRecord("a.py", 3)]),
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
    assert received == [_wire(message) for message in sent]
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
    assert trace.tracing == TracingCore("monitoring")
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
