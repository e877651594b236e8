"""A batch the DataLoader's collate function failed on, and the torch call that failed.

``for ids, targets in loader:`` fails inside torch's ``default_collate`` (one sample of
another length: its ``torch.stack`` refuses the batch) or a library's collator. The user's
line names none of what was passed: its targets still hold the previous batch. The
traceback does: the DataLoader's fetch frame holds the samples it gave the collate function
and their indices in the dataset (:func:`collated_in`).

The op watch sees the failing call on the loop's checked hits. On the others (the third
epoch's batch that held the short sample), once the run has ended with the error, nothing of
the program runs after it: :func:`rerun` calls the collate function again on the same
samples, under a torch function mode that keeps the first call that raises. A rerun whose
failure is not the program's (another error, or none) is dropped.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from types import FrameType, TracebackType
from typing import Any

from shapelens.engine.findings.call_mode import call_mode
from shapelens.engine.findings.call_trials import Verdict, judge
from shapelens.engine.findings.op_watch import FailedCall
from shapelens.engine.findings.replay import quiet
from shapelens.engine.torch_support import torch_compat


@dataclass(frozen=True)
class Collated:
    """What a DataLoader's fetch gave its collate function: the samples, as the dataset
    returned them, and their indices in it (None for an iterable dataset)."""

    dataset: Any
    collate_fn: Any
    samples: list[Any]
    indices: list[int] | None

    def index_of(self, position: int) -> int | None:
        """The dataset index of the batch's ``position``-th sample."""
        indices = self.indices
        if indices is None or position >= len(indices):
            return None
        try:
            return int(indices[position])
        except (TypeError, ValueError):
            return None


def collated_in(exc: BaseException, tb: TracebackType | None) -> Collated | None:
    """The collate call that ``exc``'s traceback (``tb``: from the user's frame inwards)
    passes through, for an error a collate raises on a batch that does not fit (not the end
    of the data, not an interrupt)."""
    if not isinstance(exc, Exception) or isinstance(exc, StopIteration | StopAsyncIteration):
        return None
    try:
        fetched = torch_compat.data_loader_fetch(tb or exc.__traceback__)
    except Exception:
        return None
    if fetched is None:
        return None
    dataset, collate_fn, samples, indices = fetched
    if indices is not None:
        try:
            indices = list(indices)
        except TypeError:
            indices = None
    return Collated(dataset, collate_fn, samples, indices)


def rerun(collated: Collated, exc: BaseException, frame: FrameType) -> FailedCall | None:
    """The torch call that fails when the collate function runs again on the same samples,
    kept for ``frame`` (the user's loop), if it fails as the program did."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    kept: list[tuple[Any, tuple[Any, ...], dict[str, Any], BaseException]] = []

    def on_call(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        try:
            return func(*args, **kwargs)
        except Exception as err:
            if not kept:  # the innermost: the calls around it raise the same error
                kept.append((func, args, kwargs, err))
            raise

    raised: BaseException | None = None
    try:
        with quiet(), torch.no_grad(), call_mode(torch, on_call):
            collated.collate_fn(collated.samples)
    except Exception as err:
        raised = err
    if not kept:  # no torch call failed: the collate's own check raised
        if raised is None or not _same(raised, exc):
            return None
        checked, args = _innermost_call(raised)
        return FailedCall(
            func=OwnCheck(checked), args=args, kwargs={}, exc=exc, frame=frame,
            verdict=Verdict("op_error"),
        )  # fmt: skip
    func, args, kwargs, first = kept[0]
    if not _same(first, exc):
        return None
    try:
        verdict = judge(torch, func, args, kwargs)
    except Exception:
        return None
    return FailedCall(func=func, args=args, kwargs=kwargs, exc=exc, frame=frame, verdict=verdict)


class OwnCheck:
    """The collate function's own Python code raised, no torch call failing
    (``default_collate``'s "each element in list of batch should be of equal size"): the
    function that raised, by name, stands for the failed call, its arguments for the
    call's."""

    def __init__(self, name: str) -> None:
        self.name = name


def _same(err: BaseException, exc: BaseException) -> bool:
    """Whether the rerun failed as the program did."""
    return type(err) is type(exc) and str(err) == str(exc)


def _innermost_call(err: BaseException) -> tuple[str, tuple[Any, ...]]:
    """The function whose code raised ``err`` (the traceback's innermost frame), and the
    values of its parameters."""
    tb = err.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    if tb is None:
        return "?", ()
    code, local = tb.tb_frame.f_code, tb.tb_frame.f_locals
    names = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
    return code.co_name, tuple(local[name] for name in names if name in local)
