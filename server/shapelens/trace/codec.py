"""JSON codec for the trace file (``shapelens run --json``), schema ``shapelens.trace/2``.

``/2`` carries findings as data (expression, operands, facts); a ``/1`` file is migrated on
load: each finding keeps its message as ``note`` and its ``related`` locations."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from shapelens._version import __version__
from shapelens.trace.finding import finding_from_json, finding_to_json, shape_of
from shapelens.trace.messages import json_number, read_numbers
from shapelens.trace.model import (
    CellSource,
    CompileMode,
    DevicePeak,
    ExceptionInfo,
    LineCost,
    MemoryReport,
    ModuleCall,
    ModuleCost,
    RankEnd,
    RankValue,
    ShapeOnlyRun,
    SimulatedLine,
    SourceLocation,
    TensorSlot,
    Trace,
    TracedLine,
    TracedVar,
    TracingCore,
)

SCHEMA_ID = "shapelens.trace/2"
READABLE_SCHEMAS = ("shapelens.trace/1", SCHEMA_ID)
SCHEMA_PATH = Path(__file__).with_name("schema.json")


class TraceFormatError(ValueError):
    """A file that is not a ShapeLens trace of a version we read."""


def read_number(values: Any) -> tuple[float, float, float]:
    """A number's (last, min, max), written by ``messages.json_number``."""
    last, low, high = read_numbers(values)
    return last, low, high


def _ranges(value: Any) -> tuple[tuple[int, int], ...] | None:
    return None if value is None else tuple((int(lo), int(hi)) for lo, hi in value)


def var_to_json(var: TracedVar) -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": var.name,
        "type": var.type,
        "shape": None if var.shape is None else list(var.shape),
        "dtype": var.dtype,
        "device": var.device,
        "requires_grad": var.requires_grad,
        "hits": var.hits,
        "shapes": [list(s) for s in var.shapes],
    }
    if var.grad_fn is not None:
        out["grad_fn"] = var.grad_fn
    if var.number is not None:
        out["number"] = [json_number(v) for v in var.number]
    if var.history:
        out["history"] = [json_number(v) for v in var.history]
    if var.dim_ranges is not None and var.shape_varies:
        out["dim_ranges"] = [list(bounds) for bounds in var.dim_ranges]
    if var.shape_hits and var.shape_varies:
        out["shape_hits"] = list(var.shape_hits)
    if var.grad_varied:
        out["grad_varied"] = True
    if var.bounded_dims:
        out["bounded_dims"] = list(var.bounded_dims)
    if var.placements is not None:
        out["placements"] = var.placements
    if var.local_shape is not None:
        out["local_shape"] = list(var.local_shape)
    if var.ranks:
        out["ranks"] = [
            {
                "rank": r.rank,
                "shape": None if r.shape is None else list(r.shape),
                "dtype": r.dtype,
                "device": r.device,
                "requires_grad": r.requires_grad,
                "hits": r.hits,
                **({} if r.local_shape is None else {"local_shape": list(r.local_shape)}),
            }
            for r in var.ranks
        ]
    return out


def _line_to_json(line: TracedLine) -> dict[str, Any]:
    out: dict[str, Any] = {
        "file": line.file,
        "line": line.line,
        "hits": line.hits,
        "vars": [var_to_json(v) for v in line.vars],
    }
    if line.sampled:
        out["sampled"] = True
    return out


def trace_to_json(trace: Trace) -> dict[str, Any]:
    exc = trace.exception
    return {
        "schema": SCHEMA_ID,
        "producer": {"name": "shapelens", "version": __version__},
        "argv": list(trace.argv),
        "python": trace.python,
        **({} if trace.tracing is None else {"tracing": _tracing_to_json(trace.tracing)}),
        "duration_s": round(trace.duration_s, 6),
        "status": trace.status,
        "exit_code": trace.exit_code,
        "detail": trace.detail,
        "compile": trace.compile_mode,
        "shape_only": None if trace.shape_only is None else shape_only_to_json(trace.shape_only),
        "exception": None
        if exc is None
        else {"type": exc.type, "message": exc.message, "file": exc.file, "line": exc.line},
        "lines": [_line_to_json(line) for line in trace.lines],
        "findings": [finding_to_json(f) for f in trace.findings],
        "modules": [module_to_json(m) for m in trace.modules],
        **({"cells": [_cell_to_json(c) for c in trace.cells]} if trace.cells else {}),
        **({"memory": _memory_to_json(trace.memory)} if trace.memory is not None else {}),
        **({"ranks": [_rank_end_to_json(r) for r in trace.ranks]} if trace.ranks else {}),
        **({"tracing_stopped": trace.tracing_stopped} if trace.tracing_stopped else {}),
    }


def _rank_end_to_json(end: RankEnd) -> dict[str, Any]:
    return {
        "rank": end.rank,
        "status": end.status,
        "exit_code": end.exit_code,
        "signal": end.signal,
        "how": end.how,
        "file": end.file,
        "line": end.line,
        "collective": end.collective,
    }


def _rank_end_from_json(data: dict[str, Any]) -> RankEnd:
    return RankEnd(
        rank=int(data["rank"]),
        status=data["status"],
        exit_code=int(data["exit_code"]),
        signal=data.get("signal"),
        how=str(data["how"]),
        file=data.get("file"),
        line=None if data.get("line") is None else int(data["line"]),
        collective=data.get("collective"),
    )


def _memory_to_json(memory: MemoryReport) -> dict[str, Any]:
    return {
        "flops": memory.flops,
        "budget_bytes": memory.budget_bytes,
        "devices": [
            {
                "device": d.device,
                "peak_bytes": d.peak_bytes,
                "file": d.file,
                "line": d.line,
                "breakdown": dict(d.breakdown),
                "live_end": d.live_end,
                **(
                    {"module": d.module, "module_class": d.module_class, "phase": d.phase}
                    if d.module is not None
                    else {}
                ),
                **({"rank": d.rank} if d.rank is not None else {}),
            }
            for d in memory.devices
        ],
        "lines": [
            {
                "file": c.file,
                "line": c.line,
                "device": c.device,
                "born_bytes": c.born_bytes,
                "live_after": c.live_after,
                "peak_bytes": c.peak_bytes,
                "flops": c.flops,
                "flops_total": c.flops_total,
            }
            for c in memory.lines
        ],
    }


def memory_from_json(data: Any) -> MemoryReport | None:
    """The trace format's ``memory`` (also as the child sends it)."""
    if data is None:
        return None
    budget = data.get("budget_bytes")
    return MemoryReport(
        flops=int(data["flops"]),
        budget_bytes=None if budget is None else int(budget),
        devices=tuple(
            DevicePeak(
                device=str(d["device"]),
                peak_bytes=int(d["peak_bytes"]),
                file=d.get("file"),
                line=None if d.get("line") is None else int(d["line"]),
                breakdown=tuple((str(k), int(v)) for k, v in dict(d["breakdown"]).items()),
                live_end=int(d.get("live_end", 0)),
                module=d.get("module"),
                module_class=d.get("module_class"),
                phase=d.get("phase"),
                rank=None if d.get("rank") is None else int(d["rank"]),
            )
            for d in data["devices"]
        ),
        lines=tuple(
            LineCost(
                file=str(c["file"]),
                line=int(c["line"]),
                device=str(c["device"]),
                born_bytes=int(c["born_bytes"]),
                live_after=int(c["live_after"]),
                peak_bytes=int(c["peak_bytes"]),
                flops=int(c["flops"]),
                flops_total=int(c["flops_total"]),
            )
            for c in data["lines"]
        ),
    )


def _tracing_to_json(tracing: TracingCore) -> dict[str, Any]:
    gate_off = {} if tracing.gate_off is None else {"gate_off": tracing.gate_off}
    return {"core": tracing.core, **gate_off}


def _tracing_of(data: Any) -> TracingCore | None:
    if data is None:
        return None
    return TracingCore(core=str(data["core"]), gate_off=data.get("gate_off"))


def _cell_to_json(cell: CellSource) -> dict[str, Any]:
    return {
        "file": cell.file,
        "source": cell.source,
        "execution_count": cell.execution_count,
        "executed_at": round(cell.executed_at, 6),
    }


def _cell_from_json(data: dict[str, Any]) -> CellSource:
    count = data.get("execution_count")
    return CellSource(
        file=str(data["file"]),
        source=str(data["source"]),
        execution_count=None if count is None else int(count),
        executed_at=float(data["executed_at"]),
    )


def module_to_json(module: ModuleCall) -> dict[str, Any]:
    out: dict[str, Any] = {
        "path": module.path,
        "class": module.cls,
        "params": module.params,
        "trainable_params": module.trainable_params,
        "calls": module.calls,
        "inputs": [_slot_to_json(s) for s in module.inputs],
        "outputs": [_slot_to_json(s) for s in module.outputs],
        "declared": _location_to_json(module.declared),
        "forward": _location_to_json(module.forward),
    }
    if module.calls_sampled:
        out["calls_sampled"] = True
    if module.rank is not None:
        out["rank"] = module.rank
    if module.shard_bytes is not None:
        out["shard_bytes"] = module.shard_bytes
    if module.cost is not None:
        out["cost"] = {
            "param_bytes": module.cost.param_bytes,
            "activation_bytes": module.cost.activation_bytes,
            "flops": module.cost.flops,
            "backward_flops": module.cost.backward_flops,
            "grad_bytes": module.cost.grad_bytes,
            "optimizer_state_bytes": module.cost.optimizer_state_bytes,
        }
    return out


def _slot_to_json(slot: TensorSlot) -> dict[str, Any]:
    out: dict[str, Any] = {
        "shape": None if slot.shape is None else list(slot.shape),
        "dtype": slot.dtype,
        "device": slot.device,
    }
    if slot.dim_ranges is not None:
        out["dim_ranges"] = [list(bounds) for bounds in slot.dim_ranges]
    return out


def _location_to_json(location: SourceLocation | None) -> dict[str, Any] | None:
    return None if location is None else {"file": location.file, "line": location.line}


def module_from_json(data: dict[str, Any]) -> ModuleCall:
    """One entry of ``modules`` (also a ``modules`` channel message's entry)."""
    return ModuleCall(
        path=str(data["path"]),
        cls=str(data["class"]),
        params=int(data["params"]),
        trainable_params=int(data["trainable_params"]),
        calls=int(data["calls"]),
        calls_sampled=bool(data.get("calls_sampled", False)),
        inputs=tuple(_slot_from_json(s) for s in data.get("inputs", ())),
        outputs=tuple(_slot_from_json(s) for s in data.get("outputs", ())),
        declared=_location_from_json(data.get("declared")),
        forward=_location_from_json(data.get("forward")),
        rank=None if data.get("rank") is None else int(data["rank"]),
        shard_bytes=None if data.get("shard_bytes") is None else int(data["shard_bytes"]),
        cost=_module_cost_of(data.get("cost")),
    )


def _module_cost_of(data: Any) -> ModuleCost | None:
    if data is None:
        return None
    return ModuleCost(
        param_bytes=int(data["param_bytes"]),
        activation_bytes=int(data["activation_bytes"]),
        flops=int(data["flops"]),
        backward_flops=int(data.get("backward_flops", 0)),
        grad_bytes=int(data.get("grad_bytes", 0)),
        optimizer_state_bytes=int(data.get("optimizer_state_bytes", 0)),
    )


def _slot_from_json(data: dict[str, Any]) -> TensorSlot:
    return TensorSlot(
        shape=shape_of(data.get("shape")),
        dim_ranges=_ranges(data.get("dim_ranges")),
        dtype=data.get("dtype"),
        device=data.get("device"),
    )


def _location_from_json(data: Any) -> SourceLocation | None:
    if not isinstance(data, dict):
        return None
    return SourceLocation(file=str(data["file"]), line=int(data["line"]))


def shape_only_to_json(run: ShapeOnlyRun) -> dict[str, Any]:
    return {
        "simulated_cuda": run.simulated_cuda,
        "simulated": [
            {"file": s.file, "line": s.line, "values": s.values, "decisions": s.decisions}
            for s in run.simulated
        ],
    }


def shape_only_of(value: Any) -> ShapeOnlyRun | None:
    """The ``shape_only`` field (or a ``shape_only`` message): None for a real run."""
    if not isinstance(value, dict):
        return None
    return ShapeOnlyRun(
        simulated_cuda=bool(value.get("simulated_cuda")),
        simulated=tuple(
            SimulatedLine(
                file=str(s["file"]),
                line=int(s["line"]),
                values=int(s["values"]),
                decisions=int(s["decisions"]),
            )
            for s in value.get("simulated", ())
        ),
    )


def compile_mode_of(value: Any) -> CompileMode | None:
    """The ``compile`` field: "eager", "compiled", or None (also for values we don't know)."""
    if value == "eager":
        return "eager"
    if value == "compiled":
        return "compiled"
    return None


def trace_from_json(data: Any) -> Trace:
    """Build a :class:`Trace` from decoded JSON; :class:`TraceFormatError` if it is not one."""
    if not isinstance(data, dict) or data.get("schema") not in READABLE_SCHEMAS:
        found = data.get("schema") if isinstance(data, dict) else type(data).__name__
        raise TraceFormatError(f"not a {SCHEMA_ID} trace (schema: {found!r})")
    try:
        exc = data.get("exception")
        return Trace(
            argv=tuple(data["argv"]),
            python=data["python"],
            tracing=_tracing_of(data.get("tracing")),  # absent before it was recorded
            memory=memory_from_json(data.get("memory")),
            duration_s=float(data["duration_s"]),
            status=data["status"],
            exit_code=int(data["exit_code"]),
            detail=data.get("detail"),
            compile_mode=compile_mode_of(data.get("compile")),  # absent before it existed
            shape_only=shape_only_of(data.get("shape_only")),
            exception=None
            if exc is None
            else ExceptionInfo(
                type=exc["type"], message=exc["message"], file=exc["file"], line=exc["line"]
            ),
            lines=tuple(
                TracedLine(
                    file=line["file"],
                    line=int(line["line"]),
                    hits=int(line["hits"]),
                    sampled=bool(line.get("sampled", False)),
                    vars=tuple(
                        TracedVar(
                            name=v["name"],
                            type=v["type"],
                            shape=shape_of(v["shape"]),
                            dtype=v["dtype"],
                            device=v["device"],
                            requires_grad=v["requires_grad"],
                            hits=int(v["hits"]),
                            shapes=tuple(shape_of(s) or () for s in v["shapes"]),
                            grad_fn=v.get("grad_fn"),
                            dim_ranges=_ranges(v.get("dim_ranges")),
                            number=None if "number" not in v else read_number(v["number"]),
                            history=read_numbers(v.get("history", ())),
                            shape_hits=tuple(int(n) for n in v.get("shape_hits", ())),
                            grad_varied=bool(v.get("grad_varied", False)),
                            bounded_dims=tuple(int(d) for d in v.get("bounded_dims", ())),
                            placements=v.get("placements"),
                            local_shape=shape_of(v.get("local_shape")),
                            ranks=tuple(
                                RankValue(
                                    rank=int(r["rank"]),
                                    shape=shape_of(r["shape"]),
                                    dtype=r["dtype"],
                                    device=r["device"],
                                    requires_grad=r["requires_grad"],
                                    hits=int(r["hits"]),
                                    local_shape=shape_of(r.get("local_shape")),
                                )
                                for r in v.get("ranks", ())
                            ),
                        )
                        for v in line["vars"]
                    ),
                )
                for line in data["lines"]
            ),
            findings=tuple(finding_from_json(f) for f in data["findings"]),
            modules=tuple(module_from_json(m) for m in data.get("modules", ())),
            cells=tuple(_cell_from_json(c) for c in data.get("cells", ())),
            ranks=tuple(_rank_end_from_json(r) for r in data.get("ranks", ())),
            tracing_stopped=data.get("tracing_stopped"),
        )
    except (KeyError, TypeError, ValueError) as err:
        raise TraceFormatError(f"malformed {SCHEMA_ID} trace: {err!r}") from err


def write_trace(trace: Trace, path: str | os.PathLike[str]) -> None:
    """Write atomically, so an editor watching the file never reads half a trace."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".shapelens-", suffix=".json", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(trace_to_json(trace), out, indent=1)
            out.write("\n")
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def load_trace(path: str | os.PathLike[str]) -> Trace:
    try:
        with open(path, encoding="utf-8") as src:
            data = json.load(src)
    except json.JSONDecodeError as err:
        raise TraceFormatError(f"{path}: not JSON ({err})") from err
    return trace_from_json(data)
