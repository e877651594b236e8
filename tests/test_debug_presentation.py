"""How the debugger shows values (shapelens.debug.presentation, served by the pydevd plugin):
metadata only until the user expands "values", and a bounded read then."""

from __future__ import annotations

from typing import Any

from shapelens.debug import presentation

from conftest import need

torch = need("torch")


class _Spy:
    """A tensor stand-in on a GPU that records whether its data was read."""

    shape = (3000, 4)
    dtype = "float32"
    device = "cuda:0"
    requires_grad = False

    def __init__(self) -> None:
        self.read = False

    def numel(self) -> int:
        return 12000

    def reshape(self, *shape: int) -> Any:
        self.read = True
        return torch.arange(12000.0)


def test_values_are_read_only_on_expand_and_bounded() -> None:
    spy = _Spy()
    preview = presentation.ValuesPreview(spy)
    assert repr(preview) == (
        "expand to read the first 100 of 12000 values (copies from cuda:0: synchronises it)"
    )
    assert not spy.read
    children = preview.children()
    assert spy.read
    assert [name for name, _, _ in children[:2]] == ["[0]", "[1]"]
    assert len(children) == presentation.PREVIEW_VALUES + 1
    assert children[-1][:2] == ("…", "11900 more not read")


def test_summaries_never_show_data() -> None:
    huge = torch.empty(10**6, 10**6, device="meta")
    assert presentation.summary(huge) == "Tensor (1000000,1000000) f32 meta"
    assert repr(presentation.ValuesPreview(huge)) == "no values: a meta tensor has none"
    assert presentation.summary([torch.zeros(2), "label", 3]) == "list [(2,) f32 cpu, 'label', 3]"
    assert presentation.summary((1, 2)) is None  # no tensor: the debugger's own text
    net = torch.nn.Sequential(torch.nn.Linear(1000, 1000), torch.nn.ReLU())
    assert presentation.summary(net) == "Sequential · 1.0M params · 2 children"
    assert presentation.may_summarise(dict) and not presentation.may_summarise(int)
