"""One settings schema: every option of a run, its hints and the editor, declared once.

:mod:`.schema` says how a setting is described, :mod:`.groups` declares them (a frozen
dataclass per group); the command line (:mod:`.cli`), the language server's client
settings (:mod:`.client`) and the extension's ``contributes.configuration``
(:mod:`.export`) are derived from them. The traced child imports :mod:`.groups` only.
"""
