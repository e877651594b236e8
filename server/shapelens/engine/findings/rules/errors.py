"""``device_mismatch``, ``dtype_mismatch``, ``shape_mismatch``, ``op_error``: a torch call
that raised on a user's line, explained. A backward that needs a tensor changed in place,
from where that happened (:mod:`.in_place`). Else from the call itself when the op watch saw it
(:mod:`.failed_call`: each operand as passed); else, where a library's own code raised, from
the call the statement made into it (:mod:`.library_call`); else from the values the
failing statement names (:mod:`.mismatch`). The engine reports them only if the run ends
with the error.
"""

from __future__ import annotations

from shapelens.engine.findings.context import RunFacts
from shapelens.engine.findings.events import CallFailed, Raised
from shapelens.engine.findings.rule import Rule
from shapelens.engine.findings.rules.failed_call import ExplainByCall
from shapelens.engine.findings.rules.in_place import ExplainInPlace
from shapelens.engine.findings.rules.library_call import ExplainLibraryCall
from shapelens.engine.findings.rules.mismatch import ExplainByNames
from shapelens.trace.finding import Finding


class ErrorRule(Rule[CallFailed | Raised]):
    kinds = ("device_mismatch", "dtype_mismatch", "shape_mismatch", "op_error")
    events = (CallFailed, Raised)
    setting = "mismatch"

    def __init__(self, facts: RunFacts) -> None:
        super().__init__(facts)
        self._by_names = ExplainByNames(facts)
        self._by_call = ExplainByCall(facts, self._by_names)
        self._by_library = ExplainLibraryCall(facts)
        self._in_place = ExplainInPlace(facts)

    def observe(self, seen: CallFailed | Raised, /) -> list[Finding]:
        in_place = self._in_place.explain(seen)  # a backward's: not about what it was passed
        if in_place:
            return in_place
        if isinstance(seen, CallFailed):
            return self._by_call.explain(seen)
        return self._by_library.explain(seen) or self._by_names.explain(seen)
