"""Torch values of every kind are read by metadata only and never break the user's program."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import line_of, need, run_cli

pytestmark = pytest.mark.backend

need("torch")


def test_exotic_tensors_and_modules(script, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    main = script(
        """
        import warnings
        import torch
        from torch import nn
        warnings.simplefilter("ignore")

        class Odd:
            dtype = "weird"
            @property
            def shape(self):
                raise RuntimeError("no shape for you")

        class Block(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(3, 2)
            def forward(self, x):
                h = self.fc(x)
                return h.relu()

        huge = torch.empty(10**6, 10**6, device="meta")
        sparse = torch.eye(3).to_sparse()
        nested = torch.nested.nested_tensor([torch.zeros(2), torch.zeros(3)])
        cplx = torch.zeros(2, dtype=torch.complex64)
        half = torch.zeros(2, dtype=torch.bfloat16)
        named = torch.zeros(2, 3)
        if hasattr(named, "refine_names"):  # named tensors are gone from recent torch
            named = named.refine_names("N", "C")
        mm = torch.aminmax(torch.arange(5.0))
        top = torch.randn(6).topk(2)
        odd = Odd()
        model = Block()
        out = model(torch.randn(4, 3))
        param = model.fc.weight
        print("survived")
        """
    )
    run = run_cli("--quiet", "main.py", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "survived"
    huge = run.var(main, line_of(main, "huge ="), "huge")
    assert (huge["shape"], huge["device"]) == ([10**6, 10**6], "meta")
    assert run.var(main, line_of(main, "sparse ="), "sparse")["shape"] == [3, 3]
    nested = run.var(main, line_of(main, "nested ="), "nested")
    assert nested["shape"] is None and nested["dtype"] == "float32"
    assert run.var(main, line_of(main, "cplx ="), "cplx")["dtype"] == "complex64"
    assert run.var(main, line_of(main, "half ="), "half")["dtype"] == "bfloat16"
    assert run.var(main, line_of(main, "named ="), "named")["shape"] == [2, 3]
    assert run.var(main, line_of(main, "mm ="), "mm.min")["shape"] == []
    assert run.var(main, line_of(main, "top ="), "top.indices")["dtype"] == "int64"
    odd = run.var(main, line_of(main, "odd ="), "odd")
    assert odd["shape"] is None and odd["type"] == "__main__.Odd"
    # nn.Module.forward called through model(x): its lines are traced
    h = run.var(main, line_of(main, "h = self.fc(x)"), "h")
    assert (h["shape"], h["requires_grad"], h["grad_fn"]) == ([4, 2], True, "AddmmBackward0")
    assert run.var(main, line_of(main, "def forward"), "x")["shape"] == [4, 3]
    assert run.var(main, line_of(main, "return h.relu()"), "<return>")["shape"] == [4, 2]
    param = run.var(main, line_of(main, "param ="), "param")
    assert param["type"] == "torch.nn.parameter.Parameter" and param["requires_grad"] is True
    assert "grad_fn" not in param  # a leaf: no grad_fn
