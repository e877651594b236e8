"""How per-rank endings merge into the run's status: the first failure is the run's."""

from __future__ import annotations

from shapelens.trace.merge import merge_traces
from shapelens.trace.model import ExceptionInfo, Trace


def _rank(status: str, exception: ExceptionInfo | None = None) -> Trace:
    return Trace(
        argv=("main.py",),
        python="3.11.0",
        duration_s=1.0,
        status=status,  # type: ignore[arg-type]
        exit_code=0 if status == "ok" else 1,
        exception=exception,
    )


RAISED = ExceptionInfo(type="EOFError", message="EOF when reading a line", file="/p/a.py", line=3)
SEGFAULT = ExceptionInfo(type="FatalError", message="Segmentation fault", file="/p/a.py", line=5)


def test_a_rank_torchrun_stopped_after_another_raised_does_not_make_the_run_a_crash() -> None:
    merged = merge_traces({0: _rank("exception", RAISED), 1: _rank("crashed")}, ended_at={0: 1.0})
    assert merged.status == "exception"
    assert merged.exception is not None and merged.exception.message.startswith("[rank 0]")


def test_a_rank_that_crashed_on_its_own_still_makes_the_run_a_crash() -> None:
    merged = merge_traces({0: _rank("exception", RAISED), 1: _rank("crashed", SEGFAULT)})
    assert merged.status == "crashed"
    alone = merge_traces({0: _rank("ok"), 1: _rank("crashed")})
    assert alone.status == "crashed"


def test_each_rank_keeps_its_module_tree() -> None:
    from dataclasses import replace

    from shapelens.present.modules import modules_table
    from shapelens.trace.model import ModuleCall, TensorSlot

    def net(batch: int) -> ModuleCall:
        slot = TensorSlot(shape=(batch, 4), dtype="float32", device="cpu")
        return ModuleCall(path="", cls="Net", params=20, trainable_params=20, calls=3,
                          inputs=(slot,), outputs=(slot,))  # fmt: skip

    merged = merge_traces({0: replace(_rank("ok"), modules=(net(8),)),
                           1: replace(_rank("ok"), modules=(net(7),))})  # fmt: skip
    assert [(m.rank, m.inputs[0].shape) for m in merged.modules] == [(0, (8, 4)), (1, (7, 4))]
    assert "Net [r1]" in modules_table(merged.modules)
    single = merge_traces({0: replace(_rank("ok"), modules=(net(8),))})
    assert single.modules[0].rank is None
