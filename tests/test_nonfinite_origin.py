"""The first NaN at its origin, on any hit: a loss that turns NaN after hundreds of steps is
reported where the first non-finite value was made (a ``log`` of a probability that rounded
to exactly 1, in a helper), on the hit it happened, with its finite input; never on the
loss line, nor after the optimizer spread it into the weights."""

from __future__ import annotations

from pathlib import Path

from conftest import line_of, need, run_cli

need("torch")

SATURATING = """
import torch
from torch import nn

torch.manual_seed(0)
scores = torch.cat([torch.linspace(-3, -1, 8), torch.linspace(1, 3, 8)]).unsqueeze(1)
admitted = (scores.squeeze(1) > 0).float()


def bce(logits, targets):
    p = torch.sigmoid(logits)
    log_p = torch.log(p)
    log_not_p = torch.log(1 - p)
    return -(targets * log_p + (1 - targets) * log_not_p).mean()


model = nn.Linear(1, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=4.0)
for step in range(400):
    loss = bce(model(scores).squeeze(1), admitted)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print("final loss", loss.item())
"""


def test_a_late_nan_is_reported_where_it_was_made(script, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    main = script(SATURATING)
    run = run_cli("main.py", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert run.trace is not None
    [finding] = run.findings("nonfinite")
    assert finding["line"] == line_of(main, "log_not_p =")
    assert (finding["state"], finding["op"]) == ("Inf", "torch.log")
    # Past the dense reads (the doubling schedule of checks missed it), and the hit where it
    # happened: the loss line was read on every hit, before the optimizer spread it.
    assert finding["hit"] == 280
    assert [o["name"] for o in finding["operands"]] == ["log_not_p", "1 - p"]
    assert finding["operands"][1]["shape"] == [16]
    assert "made by torch.log of finite `1 - p`" in finding["message"]


INLINE = """
import torch
from torch import nn

torch.manual_seed(0)
scores = torch.cat([torch.linspace(-3, -1, 8), torch.linspace(1, 3, 8)]).unsqueeze(1)
admitted = (scores.squeeze(1) > 0).float()
model = nn.Linear(1, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=4.0)
for step in range(400):
    p = torch.sigmoid(model(scores).squeeze(1))
    loss = -(admitted * torch.log(p) + (1 - admitted) * torch.log(1 - p)).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if step % 100 == 0:
        print(f"step {step} loss {loss.item():.4f}")
"""


def test_a_loss_written_inline_is_caught_on_its_hit(script, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The loss is computed on the loop's own line, no helper returns it: the line is
    probed on each hit between its sampled reads, so hit 280 is seen before the step makes
    the weights NaN, and of the line's two ``torch.log`` calls the second is named."""
    main = script(INLINE)
    run = run_cli("main.py", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("step 0 loss ")
    [finding] = run.findings("nonfinite")
    assert (finding["line"], finding["hit"]) == (line_of(main, "loss = -("), 280)
    assert (finding["state"], finding["op"]) == ("Inf", "torch.log")
    assert [o["name"] for o in finding["operands"]] == ["torch.log(1 - p)", "1 - p"]
    assert "made by torch.log of finite `1 - p`" in finding["message"]
