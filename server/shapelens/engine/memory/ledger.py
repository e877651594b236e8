"""The accounts of a run's tensor memory and FLOPs: storages, not views.

A storage is counted once, when the first op that returns it runs, at the user's line that
ran the op, and leaves the accounts when it is freed (a view or a second name costs
nothing). Each storage has a category, as torch's own ``MemTracker`` sorts them:
``parameters`` (it became an ``nn.Parameter``), ``gradients`` (a parameter's ``.grad``,
settled when a backward pass ends), ``optimizer state`` (a tensor of an optimizer's
``state``, settled when its step ends), ``activations`` (made by a forward op with autograd
recording, so possibly saved for backward) and ``other`` (inputs, the temporaries of a
backward or a step, what ran without grad). A peak reached inside a backward or a step is
settled too: what that pass made and kept moves from ``other`` to its category there.

Cost grows with lines and devices, not with iterations: a line's figures are updated in
place, its bytes born are those of its latest hit.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

CATEGORIES = ("parameters", "gradients", "optimizer state", "activations", "other")
KEPT_BY_MODULES = frozenset({"gradients", "optimizer state"})
"""What the module tree shows per module besides parameters: a change re-sends the tree."""
Where = tuple[str, int]
"""(file, line) of a user's line."""


@dataclass
class LineCost:
    device: str
    born_bytes: int = 0
    """Bytes of the storages made by this line's latest hit."""
    live_after: int = 0
    """Live bytes on the device after the line's latest op."""
    peak_bytes: int = 0
    """The most live bytes on the device while the line ran (any hit)."""
    flops: int = 0
    """FLOPs of the line's latest hit (torch's FlopCounterMode formulas)."""
    flops_total: int = 0


@dataclass
class ModuleCost:
    """A module's latest forward call and the backward through it, its children's included
    (as torchinfo and FlopCounterMode count)."""

    activation_bytes: int = 0
    """Storages made while autograd recorded: what its forward may keep for the backward."""
    flops: int = 0
    backward_flops: int = 0
    """From the gradients of its outputs being ready to those of its inputs."""


Running = tuple[int, str]
"""(id of a module, ``forward`` or ``backward``): what was running at an op."""


@dataclass
class DevicePeak:
    bytes: int = 0
    where: Where | None = None
    breakdown: dict[str, int] = field(default_factory=dict)
    serial: int = 0
    """The op count when it was reached (to settle a peak inside a backward or a step)."""
    running: Running | None = None
    """The innermost module whose forward or backward made the peak's op."""


@dataclass
class OutOfMemory:
    """Where the device's live bytes first went past the budget."""

    device: str
    where: Where
    live_bytes: int
    budget_bytes: int
    breakdown: dict[str, int]
    serial: int


class MemoryLedger:
    def __init__(self, budget_bytes: int | None = None, budget_device: str = "cuda") -> None:
        self.budget_bytes = budget_bytes
        self.budget_device = budget_device
        """The budget applies to devices of this type (``cuda:0``, ``cuda:1``)."""
        self._storages: dict[int, tuple[int, str, str]] = {}  # key → (bytes, device, category)
        self.live: dict[str, dict[str, int]] = {}  # device → category → bytes
        self.live_total: dict[str, int] = {}
        self.lines: dict[Where, LineCost] = {}
        self.peaks: dict[str, DevicePeak] = {}
        self.out_of_memory: OutOfMemory | None = None
        self.flops_total = 0
        self.ops = 0
        self.modules: dict[int, ModuleCost] = {}
        """By ``id`` of the module (the module tree holds the modules: ids stay theirs)."""
        self.on_module_costs: Callable[[], None] | None = None
        """Told when modules' costs changed after their calls (a backward pass ended)."""
        self.gradient_of: dict[int, tuple[int, int]] = {}
        """id of a parameter → (storage key, bytes) of its gradient after the latest backward:
        what the module tree reads from the flusher thread (never ``.grad`` itself, which the
        program's thread writes during a backward)."""
        self.optimizer_state_of: dict[int, int] = {}
        """id of a parameter → bytes of its optimizer state after the latest step (the
        module tree sums them per module; parameters live as long as their modules)."""
        self.module_names: dict[int, tuple[str, str]] = {}
        """id of a module → (its dot path from its root, ``""`` for a root; its class)."""
        self.changed = False

    def kept_for(self, parameter: int) -> tuple[int, int]:
        """(its gradient's bytes while that storage lives, its optimizer state's bytes)."""
        key, nbytes = self.gradient_of.get(parameter, (0, 0))
        return (nbytes if key in self._storages else 0), self.optimizer_state_of.get(parameter, 0)

    # -- storages ------------------------------------------------------------------------
    def tracks(self, key: int) -> bool:
        return key in self._storages

    def allocated(self, key: int, nbytes: int, device: str, category: str, where: Where) -> None:
        self._storages[key] = (nbytes, device, category)
        by_category = self.live.setdefault(device, dict.fromkeys(CATEGORIES, 0))
        by_category[category] += nbytes
        self.live_total[device] = self.live_total.get(device, 0) + nbytes
        self._line(where, device).born_bytes += nbytes
        self.changed = True

    def freed(self, key: int) -> None:
        entry = self._storages.pop(key, None)
        if entry is None:
            return
        nbytes, device, category = entry
        self.live[device][category] -= nbytes
        self.live_total[device] -= nbytes
        if category in KEPT_BY_MODULES:  # `opt.zero_grad()`: what the modules keep shrank
            self._module_costs_changed()

    def recategorise(self, key: int, category: str) -> tuple[str, int, str] | None:
        """A tracked storage turned out to be a parameter, a gradient, optimizer state:
        (device, bytes, its old category) when that changed it."""
        entry = self._storages.get(key)
        if entry is None or entry[2] == category:
            return None
        nbytes, device, old = entry
        self._storages[key] = (nbytes, device, category)
        self.live[device][old] -= nbytes
        self.live[device][category] += nbytes
        return device, nbytes, old

    def backward_done(self) -> None:
        """A backward pass ended: the modules' backward FLOPs grew."""
        self._module_costs_changed()

    def _module_costs_changed(self) -> None:
        if self.on_module_costs is not None:
            self.on_module_costs()

    def settle(self, keys: list[int], category: str, since: int) -> None:
        """A backward pass or a step that began at op ``since`` ended: ``keys`` are what it
        made and kept (the gradients, the optimizer's state). A peak reached during it shows
        them under ``category``, not ``other``."""
        moved: dict[str, int] = {}
        for key in keys:
            change = self.recategorise(key, category)
            if change is not None and change[2] == "other":
                moved[change[0]] = moved.get(change[0], 0) + change[1]
        for device, nbytes in moved.items():
            snapshots = [self.peaks.get(device), self.out_of_memory]
            for snapshot in snapshots:
                if snapshot is None or snapshot.serial < since:
                    continue
                if isinstance(snapshot, OutOfMemory) and snapshot.device != device:
                    continue
                _shift(snapshot.breakdown, nbytes, category)
        self.changed = True
        self._module_costs_changed()  # their gradients, or the optimizer's state, are new

    # -- ops ---------------------------------------------------------------------------
    def module_called(self, key: int) -> None:
        """A module's forward starts: its figures are this call's from here on."""
        self.modules[key] = ModuleCost()

    def module_cost(self, key: int) -> dict[str, int] | None:
        """The module tree's ``cost`` of a module (trace format), when its forward ran here."""
        cost = self.modules.get(key)
        if cost is None:
            return None
        return {
            "activation_bytes": cost.activation_bytes,
            "flops": cost.flops,
            "backward_flops": cost.backward_flops,
        }

    def new_hit(self, where: Where) -> None:
        """The line runs again: its bytes born and FLOPs start from zero."""
        cost = self.lines.get(where)
        if cost is not None:
            cost.born_bytes = 0
            cost.flops = 0

    def counted_flops(self, where: Where, device: str, flops: int) -> None:
        cost = self._line(where, device)
        cost.flops += flops
        cost.flops_total += flops
        self.flops_total += flops
        self.changed = True

    def op_done(self, where: Where, devices: set[str], running: Running | None = None) -> None:
        """After an op of ``where`` (made in ``running``): its devices' live bytes, peaks and
        budget."""
        self.ops += 1
        for device in devices:
            live = self.live_total.get(device, 0)
            cost = self._line(where, device)
            cost.live_after = live
            cost.peak_bytes = max(cost.peak_bytes, live)
            peak = self.peaks.setdefault(device, DevicePeak())
            if live > peak.bytes:
                peak.bytes = live
                peak.where = where
                peak.breakdown = {k: v for k, v in self.live[device].items() if v}
                peak.serial = self.ops
                peak.running = running
            if (
                self.out_of_memory is None
                and self.budget_bytes is not None
                and device.split(":")[0] == self.budget_device
                and live > self.budget_bytes
            ):
                self.out_of_memory = OutOfMemory(
                    device=device,
                    where=where,
                    live_bytes=live,
                    budget_bytes=self.budget_bytes,
                    breakdown={k: v for k, v in self.live[device].items() if v},
                    serial=self.ops,
                )
        self.changed = True

    def _line(self, where: Where, device: str) -> LineCost:
        cost = self.lines.get(where)
        if cost is None:
            cost = self.lines[where] = LineCost(device=device)
        elif device != cost.device and device.split(":")[0] != "cpu":
            cost.device = device  # a line that touches a GPU is about the GPU
        return cost

    def report(self) -> dict[str, Any]:
        """The trace format's ``memory`` (docs/trace-format.md): every figure in bytes and
        FLOPs. The flusher thread calls it while ops run: the tables are copied first (a
        copy of a dict is one step under the GIL), figures a flush later are exact again."""
        peaks = sorted(list(self.peaks.items()))
        lines = list(self.lines.items())
        return {
            "flops": self.flops_total,
            "budget_bytes": self.budget_bytes,
            "devices": [
                {
                    "device": device,
                    "peak_bytes": peak.bytes,
                    "file": peak.where[0] if peak.where else None,
                    "line": peak.where[1] if peak.where else None,
                    "breakdown": dict(peak.breakdown),
                    "live_end": self.live_total.get(device, 0),
                    **self._running_at(peak.running),
                }
                for device, peak in peaks
            ],
            "lines": [
                {
                    "file": file,
                    "line": line,
                    "device": cost.device,
                    "born_bytes": cost.born_bytes,
                    "live_after": cost.live_after,
                    "peak_bytes": cost.peak_bytes,
                    "flops": cost.flops,
                    "flops_total": cost.flops_total,
                }
                for (file, line), cost in lines
            ],
        }

    def _running_at(self, running: Running | None) -> dict[str, str]:
        """The trace's ``module``, ``module_class`` and ``phase`` of a peak, when known."""
        name = self.module_names.get(running[0]) if running is not None else None
        if running is None or name is None:
            return {}
        return {"module": name[0], "module_class": name[1], "phase": running[1]}


def _shift(breakdown: dict[str, int], nbytes: int, category: str) -> None:
    """Up to ``nbytes`` of a snapshot's ``other`` were ``category`` all along."""
    shift = min(nbytes, breakdown.get("other", 0))
    if shift:
        breakdown["other"] -= shift
        breakdown[category] = breakdown.get(category, 0) + shift
        if not breakdown["other"]:
            del breakdown["other"]
