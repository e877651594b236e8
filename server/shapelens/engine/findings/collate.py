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

A DataLoader with workers collates in them: the error comes back as text
(``Caught RuntimeError in DataLoader worker process 0``), with no sample in this process.
:class:`WorkerBatches` keeps the dataset indices of the batches the workers were sent (the
last :data:`KEPT_BATCHES`), so that, once the run has ended with such an error, the failed
batch is fetched again here (:meth:`SentToWorker.fetched_here`: the dataset's
``__getitem__``, quiet, untraced) and collated again as above. A batch that does not fail
here as it failed in the worker (random crops draw other lengths here) is dropped.
"""

from __future__ import annotations

import sys
import traceback
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from types import FrameType, ModuleType, TracebackType
from typing import Any

from shapelens.engine.findings.call_mode import call_mode
from shapelens.engine.findings.call_trials import Verdict, judge
from shapelens.engine.findings.op_watch import FailedCall
from shapelens.engine.findings.replay import quiet
from shapelens.engine.torch_support import torch_compat, torch_errors
from shapelens.engine.torch_support.after_import import when_imported

KEPT_BATCHES = 64
"""Batches sent to workers whose indices are kept, per iterator (a few per worker are in
flight: ``prefetch_factor``, 2 by default)."""


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


class WorkerBatches:
    """The dataset indices of the batches each multi-process DataLoader iterator sent its
    workers, by send index, once ``torch.utils.data`` is imported (until :meth:`remove`)."""

    def __init__(self) -> None:
        self._sent: weakref.WeakKeyDictionary[Any, dict[int, Any]] = weakref.WeakKeyDictionary()
        self._restore: Callable[[], None] | None = None
        self._removed = False

    def install(self) -> None:
        when_imported("torch.utils.data.dataloader", self._patch)

    def _patch(self, dataloader: ModuleType) -> None:
        if not self._removed:
            self._restore = torch_compat.remember_worker_batches(dataloader, self._remember)

    def _remember(self, iterator: Any, sent: int, indices: Any) -> None:
        batches = self._sent.get(iterator)
        if batches is None:
            batches = self._sent[iterator] = {}
        batches.pop(sent, None)  # an epoch of persistent workers numbers from 0 again
        batches[sent] = indices
        if len(batches) > KEPT_BATCHES:
            del batches[next(iter(batches))]

    def failed_in(self, exc: BaseException, tb: TracebackType | None) -> SentToWorker | None:
        """The batch a worker's error that ``exc`` raises again here was about, if kept."""
        if not isinstance(exc, Exception) or isinstance(exc, StopIteration):
            return None  # an interrupt, or the loop's end
        try:
            found = torch_compat.worker_failure(tb or exc.__traceback__)
        except Exception:
            return None
        if found is None:
            return None
        iterator, sent, wrapper = found
        indices = self._sent.get(iterator, {}).get(sent)
        if indices is None:
            return None
        return SentToWorker(iterator, indices, wrapper.exc_type, str(wrapper.exc_msg))

    def remove(self) -> None:
        """Put the DataLoader's class back (the run is over)."""
        self._removed = True
        restore, self._restore = self._restore, None
        if restore is not None:
            restore()


@dataclass(frozen=True)
class SentToWorker:
    """A batch a DataLoader worker failed on: its iterator, the dataset indices it was sent,
    and the worker's error (its type, and its traceback as text)."""

    iterator: Any
    indices: Any
    error_type: type
    error_text: str

    def fetched_here(self) -> tuple[Collated, BaseException] | None:
        """The batch fetched again in this process, with the error its collate raised here,
        when that is the worker's error (same type, same message). Fetched twice: a dataset
        that draws at random (a crop) gives other samples each time, and failing here as
        well would only be chance, so its samples are named only when both fetches gave
        the same shapes."""
        first, again = self._fetch(), self._fetch()
        if first is None or again is None:
            return None
        if str(first[1]) != str(again[1]) or _shapes(first[0].samples) != _shapes(again[0].samples):
            return None
        return first

    def _fetch(self) -> tuple[Collated, BaseException] | None:
        torch = sys.modules.get("torch")
        if torch is None:
            return None
        try:
            with quiet(), torch.no_grad():
                torch_compat.fetch_in_this_process(self.iterator, self.indices)
        except Exception as err:
            if not self._as_in_the_worker(err):
                return None
            collated = collated_in(err, err.__traceback__)
            return None if collated is None else (collated, err)
        return None  # fetched whole here: the worker's samples were others

    def _as_in_the_worker(self, err: BaseException) -> bool:
        """Whether ``err`` is the worker's error: the same, or the worker's wording of a
        stack of unequal samples (into shared memory: the resize of its storage fails)."""
        if type(err) is not self.error_type:
            return False
        if self.error_text.endswith(_last_line(err)):
            return True
        last = self.error_text.rstrip().rsplit("\n", 1)[-1]
        return bool(
            torch_errors.WORKER_BATCH_RESIZE_ERROR.search(last)
            and torch_errors.STACK_SIZES_ERROR.search(str(err))
        )


def _shapes(value: Any, depth: int = 0) -> Any:
    """The shapes of a sample's tensors, and the lengths of its lists, as one value."""
    shape = getattr(value, "shape", None)
    if shape is not None:
        return tuple(shape)
    if depth > 4:
        return None
    if isinstance(value, dict):
        return tuple((key, _shapes(item, depth + 1)) for key, item in value.items())
    if isinstance(value, list | tuple):
        return tuple(_shapes(item, depth + 1) for item in value)
    return type(value).__name__


def _last_line(err: BaseException) -> str:
    """What a traceback's text ends with for ``err`` (``RuntimeError: stack expects ...``)."""
    return "".join(traceback.format_exception_only(type(err), err))


FailedBatch = Collated | SentToWorker
"""A batch a collate failed on: in this process, or in a DataLoader worker."""


def failed_batch(
    collated: Collated | None,
    workers: WorkerBatches | None,
    exc: BaseException,
    tb: TracebackType | None,
) -> FailedBatch | None:
    """The batch of ``collated_in(exc, tb)``, else the one a worker failed on (its indices
    kept by ``workers``), if any."""
    if collated is not None or workers is None:
        return collated
    return workers.failed_in(exc, tb)


def collated_again(
    batch: FailedBatch, exc: BaseException, frame: FrameType
) -> tuple[FailedCall, Collated, BaseException] | None:
    """:func:`rerun` of ``batch`` (a worker's fetched here first: the error it raises here,
    the worker's own, is then the one explained): the failed call, the batch as collated
    here, and the error."""
    if isinstance(batch, SentToWorker):
        fetched = batch.fetched_here()
        if fetched is None:
            return None
        batch, exc = fetched
    failed = rerun(batch, exc, frame)
    return None if failed is None else (failed, batch, exc)


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
