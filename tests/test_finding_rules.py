"""A finding's rule runs alone, behind the one interface (``findings/rule.py``): what it
observes in, the :class:`Finding` it makes out. No tracer, no records run, no torch
(numpy operands); the finding's message is already the trace format's finding."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from shapelens.engine.findings.context import RunFacts
from shapelens.engine.findings.events import NonfiniteRead, OperatorRan
from shapelens.engine.findings.rule import Rule
from shapelens.engine.findings.rules.broadcast import BroadcastRule
from shapelens.engine.findings.rules.nonfinite import NonfiniteRule
from shapelens.engine.recording.code_info import CodeInfo
from shapelens.engine.recording.run_records import RunRecords
from shapelens.engine.recording.scope import ScopeConfig, UserCodeScope
from shapelens.engine.source.source_map import SourceMaps
from shapelens.trace.finding import Finding, Operand, finding_from_json, finding_to_json

SOURCE = """\
def loss(y, pred):
    return ((y - pred) ** 2).mean()


def scores(x, mask):
    ratio = x / 0.0
    masked = x.masked_fill(mask, float("-inf"))
"""


def _setup(tmp_path: Path) -> tuple[RunFacts, RunRecords, str]:
    file = str(tmp_path / "program.py")
    sources = SourceMaps()
    sources.put(file, SOURCE)
    records = RunRecords()
    facts = RunFacts(records.origin_of, sources, UserCodeScope(ScopeConfig(root=str(tmp_path))))
    return facts, records, file


def _code_info(file: str, name: str, facts: RunFacts, records: RunRecords) -> CodeInfo:
    module = compile(SOURCE, file, "exec")
    code = next(c for c in module.co_consts if getattr(c, "co_name", None) == name)
    return CodeInfo(code, file, facts.sources.get(file), records)


def test_the_broadcast_rule_turns_an_op_into_a_finding(tmp_path: Path) -> None:
    facts, records, file = _setup(tmp_path)
    info = _code_info(file, "loss", facts, records)
    site = next(s for s in info.op_sites[2] if s.op == "-")
    rule: Rule[OperatorRan] = BroadcastRule(facts)
    y, pred = np.zeros(4), np.zeros((4, 1))

    found = rule.observe(
        OperatorRan(info=info, line=2, site=site, left=y, right=pred, result=y - pred)
    )

    assert found == [
        Finding(
            kind="broadcast",
            severity="warning",
            file=file,
            line=2,
            expression="y - pred",
            operands=(
                Operand(name="y", shape=(4,), dtype="float64", device="cpu"),
                Operand(name="pred", shape=(4, 1), dtype="float64", device="cpu"),
            ),
            operator="-",
            result_shape=(4, 4),
        )
    ]
    # One finding per line: the line is not watched any more.
    assert 2 not in info.broadcast_lines
    # The same op with operands that line up is no finding.
    fresh = _code_info(file, "loss", facts, records)
    ok = np.zeros((4, 1))
    seen = OperatorRan(info=fresh, line=2, site=site, left=ok, right=pred, result=ok)
    assert BroadcastRule(facts).observe(seen) == []


def test_the_nonfinite_rule_tells_a_nan_from_a_mask(tmp_path: Path) -> None:
    facts, records, file = _setup(tmp_path)
    rule: Rule[NonfiniteRead] = NonfiniteRule(facts)
    ratio = np.full(3, np.nan)
    stats = records.new_stats(file, 6, "ratio", np.ndarray)
    stats.shape, stats.dtype, stats.hits = ratio.shape, ratio.dtype, 1

    [finding] = rule.observe(NonfiniteRead(stats=stats, value=ratio, state="NaN"))
    assert rule.finished  # the first line where it happens: the engine stops scanning

    assert (finding.kind, finding.file, finding.line, finding.state, finding.hit) == (
        "nonfinite",
        file,
        6,
        "NaN",
        1,
    )
    assert finding.expression == "ratio = x / 0.0"
    assert finding.operands == (Operand(name="ratio", shape=(3,), dtype="float64", line=6),)
    # -inf put in by masked_fill is a mask, not a bug.
    masked = np.full(3, -np.inf)
    stats = records.new_stats(file, 7, "masked", np.ndarray)
    assert rule.observe(NonfiniteRead(stats=stats, value=masked, state="Inf")) == []


def test_a_findings_message_is_the_trace_formats_finding(tmp_path: Path) -> None:
    """The child sends what the trace file holds: the parent's codec reads it back and
    writes it again unchanged (keys, order and values)."""
    facts, records, file = _setup(tmp_path)
    info = _code_info(file, "loss", facts, records)
    site = next(s for s in info.op_sites[2] if s.op == "-")
    y, pred = np.zeros(4), np.zeros((4, 1))
    [finding] = BroadcastRule(facts).observe(
        OperatorRan(info=info, line=2, site=site, left=y, right=pred, result=y - pred)
    )
    message = finding_to_json(finding)
    assert list(message) == [
        "kind",
        "severity",
        "file",
        "line",
        "expression",
        "operands",
        "operator",
        "result_shape",
    ]
    assert finding_to_json(finding_from_json(message)) == message
