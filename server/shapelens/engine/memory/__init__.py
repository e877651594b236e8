"""Memory and compute of a run, per line and for the whole run (``--fake`` runs).

:mod:`.ledger` keeps the accounts (no torch: the live storages, each line's bytes born, live
after and peak, its FLOPs, the run's peak per device with its breakdown, the line where a
budget ran out); :mod:`.watch` feeds it from a torch dispatch mode that sees every op. The
budget comes in bytes (``settings/gpu_budget.py`` reads ``--gpu-memory``, ``--gpu``).
"""
