"""The MLP the speed benchmarks train (`workloads/mlp.py`, `trace_floor.py`,
`step_costs.py`), built in one place so each measures the same model. It lives outside
``workloads/``, so ShapeLens does not count it as user code."""

from __future__ import annotations

from typing import Any

BATCH, IN_FEATURES, HIDDEN, OUT_FEATURES = 32, 32, 64, 4


def mlp(torch: Any) -> tuple[Any, Any, Any]:
    """(model, x, y): 3 layers (hidden 64, ReLU) and a (32, 32) batch with 4 targets, drawn
    from torch's generator as it is (the caller seeds it)."""
    model = torch.nn.Sequential(
        torch.nn.Linear(IN_FEATURES, HIDDEN),
        torch.nn.ReLU(),
        torch.nn.Linear(HIDDEN, HIDDEN),
        torch.nn.ReLU(),
        torch.nn.Linear(HIDDEN, OUT_FEATURES),
    )
    return model, torch.randn(BATCH, IN_FEATURES), torch.randn(BATCH, OUT_FEATURES)
