"""What a burn-in runs, decided before it starts: its GPUs, its duration and rounds, and the collective
cycle (every placement in turn, every collective in turn, at the floor size).

The cycle runs in the load's own processes (wirecheck.burnin.worker), one process group over the
burn-in's GPUs with a sub-group per placement. A placement that needs an environment of its own
(forced_pcie: NCCL_P2P_DISABLE, read once per process by NCCL) cannot share those processes: it is
left out of the cycle, and the plan says so.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from wirecheck.measure.collectives import OPS, feasible_sizes
from wirecheck.node.placement import COLLECTIVE_CLASSES, Placement


@dataclass(frozen=True)
class Step:
    """One step of the cycle: `op` among the placement's GPUs at `size` bytes."""

    placement: Placement
    op: str
    size: int

    def as_worker_arg(self, gpus: tuple[int, ...]) -> dict:
        """The step as the workers take it: their ranks are the GPUs' places in the burn-in's list."""
        return {"placement": self.placement.id, "ranks": sorted(gpus.index(g) for g in self.placement.gpus),
                "op": self.op, "size": self.size}


@dataclass(frozen=True)
class BurnInPlan:
    duration_s: float  # --duration
    round_s: float  # gpu_health.<mode>.sustained.duration.burn_in
    memory_passes: int  # gpu_health.<mode>.memory_pattern.passes.burn_in, after each round
    window_s: float  # the load's TFLOP/s window: a round shorter than two of them is not started
    gpus: tuple[int, ...]
    names: dict  # gpu -> NVML's model name
    bus_ids: dict  # gpu -> PCI bus id
    simulated: bool
    steps: tuple[Step, ...]
    left_out: dict = field(default_factory=dict)  # placement id -> why it is not in the cycle
    hardware: dict = field(default_factory=dict)  # gpu -> wirecheck.node.hardware.Hardware.as_dict(): derived floors

    @property
    def min_round_s(self) -> float:
        """What is left of the duration below this ends the burn-in (a round needs full windows)."""
        return 2 * self.window_s

    @property
    def placements(self) -> list[Placement]:
        seen: dict[str, Placement] = {}
        for s in self.steps:
            seen.setdefault(s.placement.id, s.placement)
        return list(seen.values())


def cycle(placements: list[Placement], gpus: tuple[int, ...], size: int) -> tuple[tuple[Step, ...], dict]:
    """(the steps, the placements left out and why): each placement in turn for one collective, then the
    next collective, so that every placement carries traffic early in every round."""
    chosen, left_out = [], {}
    for p in placements:
        if p.klass not in COLLECTIVE_CLASSES:
            continue
        if not set(p.gpus) <= set(gpus):
            left_out[p.id] = "not among the burn-in's GPUs"
        elif p.env:
            switches = ", ".join(f"{k}={v}" for k, v in sorted(p.env.items()))
            left_out[p.id] = (f"needs {switches} in its processes (NCCL reads it once per process): it cannot share "
                              "the load's processes")
        else:
            chosen.append(p)
    steps = tuple(Step(p, op, size) for op in OPS for p in chosen if feasible_sizes(op, (size,), p.n_gpus))
    return steps, left_out


def plan_burn_in(thresholds, *, duration_s: float, gpus: tuple[int, ...], names: dict, bus_ids: dict,
                 simulated: bool, placements: list[Placement], hardware: dict | None = None) -> BurnInPlan:
    """The burn-in of `duration_s` over `gpus`, with the thresholds' settings for its mode."""
    settings = thresholds.gpu_health.settings(simulated)
    size = thresholds.collective_settings(simulated).floor_size
    steps, left_out = cycle(placements, tuple(gpus), size)
    return BurnInPlan(duration_s=duration_s, round_s=settings.sustained_duration_s("burn_in"),
                      memory_passes=settings.memory_passes("burn_in"), window_s=settings.window_s, gpus=tuple(gpus), names=dict(names),
                      bus_ids=dict(bus_ids), simulated=simulated, steps=steps, left_out=left_out,
                      hardware=dict(hardware or {}))
