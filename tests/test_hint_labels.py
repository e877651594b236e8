"""Hint labels of shapes that vary: every varying dim as its range, over every shape read."""

from __future__ import annotations

from pathlib import Path

from shapelens.present.labels import var_label
from shapelens.present.markdown import var_table
from shapelens.trace import TracedVar

from conftest import line_of, run_cli

GROWING = """
import numpy as np

def attend(x):
    t = x.shape[1]
    att = np.zeros((8, 3, t, t))
    return att

lengths = [2, 3, 1, 5, 4, 6, 7, 8, 9, 10, 11, 12]  # T=1 between others, then past 8 distinct
for t in lengths:
    x = np.zeros((2, t, 6))
    att = attend(x)
flat = np.zeros(4)
for step in range(3):
    flat = flat.reshape(2, 2) if step == 1 else np.zeros(4)
"""


def test_varying_dims_show_as_ranges_in_the_listing_and_the_trace(script, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    main = script(GROWING)
    run = run_cli("main.py", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    x = run.var(main, line_of(main, "x = np.zeros"), "x")
    assert len(x["shapes"]) == 8  # the first 8 distinct shapes ...
    assert x["dim_ranges"] == [[2, 2], [1, 12], [6, 6]]  # ... the ranges count all 12
    att = run.var(main, line_of(main, "att = np.zeros"), "att")
    assert att["dim_ranges"] == [[8, 8], [3, 3], [1, 12], [1, 12]]
    flat = run.var(main, line_of(main, "flat = flat.reshape"), "flat")
    assert "dim_ranges" not in flat  # its number of dims varied
    constant = run.var(main, line_of(main, "flat = np.zeros(4)"), "flat")
    assert "dim_ranges" not in constant
    listing = run.stderr
    assert "x (2,1‥12,6) f64 cpu ×12" in listing, listing
    assert "att (8,3,1‥12,1‥12) f64 cpu ×12" in listing, listing
    assert "flat (4,)|(2,2) f64 cpu ×3" in listing, listing  # not "(4,)…(4,)": it varied


def _var(**fields: object) -> TracedVar:
    base: dict[str, object] = dict(
        name="x", type="torch.Tensor", shape=(2, 5, 6), dtype="float32", device="cpu",
        requires_grad=False, hits=4, shapes=((2, 2, 6), (2, 1, 6), (2, 5, 6)),
    )  # fmt: skip
    base.update(fields)
    return TracedVar(**base)  # type: ignore[arg-type]


def test_label_and_hover_of_a_varying_shape() -> None:
    ranged = _var(dim_ranges=((2, 2), (1, 5), (6, 6)))
    assert var_label(ranged) == "x (2,1‥5,6) f32 cpu ×4"
    hover = var_table(ranged)
    assert "| last shape | `(2,5,6)` |" in hover
    assert "| dims | `(2,1‥5,6)` |" in hover
    assert "| shapes seen | `(2,2,6), (2,1,6), (2,5,6)` |" in hover
    # Without ranges (dims that varied in number, or an older trace): the distinct shapes.
    assert var_label(_var()) == "x (2,2,6)|(2,1,6)|(2,5,6) f32 cpu ×4"
    assert var_label(_var(shapes=((1,), (1, 2), (1, 2, 3), (4,)))) == (
        "x (1,)|(1,2)|(1,2,3)|… f32 cpu ×4"
    )
    constant = _var(shape=(8, 3), shapes=((8, 3),), dim_ranges=((8, 8), (3, 3)))
    assert var_label(constant) == "x (8,3) f32 cpu ×4"
