"""The tracing backends: the protocol and the one choice among them (:mod:`.choice`),
``sys.settrace`` with its C gate on 3.11 (:mod:`.settrace`, :mod:`.library_gate`) and
``sys.monitoring`` on 3.12+ (:mod:`.monitoring`)."""
