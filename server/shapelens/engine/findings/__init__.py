"""Findings: likely bugs pointed at a line (broadcast, device/dtype mismatch, non-finite).

Each kind's rule is a :class:`~shapelens.engine.findings.rule.Rule` in its own module; which
kinds run is a group of the settings schema (:class:`shapelens.settings.groups.FindingsConfig`).
"""
