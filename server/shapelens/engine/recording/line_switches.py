"""Which hot lines a backend that can stop a line's events (sys.monitoring, the 3.11 gate)
stops, and what the run records of it: a line switched off has its hits estimated, one
stopped by ``--sample`` counted as a lower bound. Both backends ask :meth:`LineSwitches.line_off`
after a hit, so they switch the same lines off."""

from __future__ import annotations

import sys

from shapelens.engine.recording.code_info import CodeInfo
from shapelens.engine.recording.run_records import RunRecords
from shapelens.engine.recording.sampling import DENSE_HITS


class LineSwitches:
    """The switching of lines off and on, recorded into ``records``."""

    def __init__(self, records: RunRecords) -> None:
        self._records = records

    def switch_off(self, info: CodeInfo, statement: int, count: int, generation: int) -> bool:
        """Whether a backend that can stop a line's events (sys.monitoring) may stop those of
        ``statement`` after its ``count``-th hit; if so, its hits are estimated from then on.
        Only a statement past its dense hits, whose values stayed the same, inside a loop or a
        function (whose header or calls keep being counted), never a loop header, nor in a
        loop over batches (its first line reads the batch before the model is given it).
        ``generation`` tells the backend's re-arms apart (see ``CodeInfo.switched_off``)."""
        counter = info.counter_of.get(statement)
        if counter is None or count <= DENSE_HITS or statement in info.loop_headers:
            return False
        if info.dense_until.get(counter) == sys.maxsize:  # batches: see ``StatementRecorder._read``
            return False
        if statement in info.stores and info.read_at.get(statement, 0) <= count + 1:
            return False  # read on its next hits: something changed lately
        with self._records.lock:  # the mark and its estimate come and go together: see switch_on
            info.switched_off[statement] = generation
            self._records.switch_off(info.file, statement, counter)
        return True

    def line_off(
        self,
        info: CodeInfo,
        last: int,
        statement: int,
        count: int,
        generation: int,
        limit: int,
        adaptive: bool,
    ) -> bool:
        """Whether a backend that can stop a line's events (sys.monitoring, the 3.11 gate)
        stops those of ``statement``'s line after its ``count``-th hit, the frame having run
        ``last`` before: for good from ``limit`` hits on (``--sample``: its counts become lower
        bounds), else when ``adaptive`` and :meth:`switch_off` says so. Not where the frame's
        last statement is a loss that no line probes yet: this line stays on and probes it
        (``CodeInfo.probe_at``), before the optimizer steps."""
        if count >= limit:
            self.mark_sampled(info, statement)
            return True
        if not adaptive or info.stays_on or not self.switch_off(info, statement, count, generation):
            return False
        if last in info.loss_lines and last not in info.probe_at.values():
            info.probe_at[statement] = last
            return False
        return True

    def switch_on(self, info: CodeInfo, statement: int) -> None:
        """The backend reports ``statement`` again (re-armed): the estimate becomes its count,
        and its values are read on this hit."""
        # Under the lock switch_off holds: a thread re-armed between another's mark and its
        # estimate popped the mark alone, and the estimate, left behind, was added to the
        # line's counted hits at the end (80,000 calls showed 81,918).
        with self._records.lock:
            if info.switched_off.pop(statement, None) is None:
                return  # another thread's event switched it on
            self._records.switch_on(info.file, statement)
        info.read_at[statement] = 0

    def mark_sampled(self, info: CodeInfo, statement: int) -> None:
        """The backend stops reporting ``statement`` (sampling): its counts are lower bounds."""
        self._records.mark_sampled(info.file, statement)
