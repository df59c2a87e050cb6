"""The GPU load, parent side: one worker per GPU of the run, all at once, in one worker group
that serves three calls (phases), each made once on first use:
- `figures`: HBM copy and read bandwidth, GEMM bf16 (with its results against the reference)
  and fp8;
- `sustained`: the GEMM load held for the level's duration while a thread of this process
  samples every GPU through NVML (wirecheck.node.gpu_sampling);
- `memory`: the pattern test over most of each GPU's free memory.
Every GPU runs the same phase at the same time, because power and heat are shared: a GPU that
holds its clocks alone may not when its seven neighbours pull 700 W each.

No torch here: the workers import it. Before the first phase the GPUs' compute processes are
read from NVML: a figure measured while another process computes on the GPU says so.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from wirecheck.core.failures import HUNG
from wirecheck.node import nvml
from wirecheck.node.gpu_sampling import LoadSampler, Sampling
from wirecheck.workers.launcher import WorkerError, WorkerGroup
from wirecheck.workers.pool import WorkerPool

WORKERS = "wirecheck.gpu.worker"  # the module with the worker functions figures, sustained, memory
# The phases' names are vocabulary (the plan prices them, the record's kinds are named after them).
from wirecheck.vocab.work import FIGURES, MEMORY, SUSTAINED  # noqa: E402
PHASES = (FIGURES, SUSTAINED, MEMORY)


@dataclass
class Phase:
    """One call on every GPU: each GPU's result, or the group's failure."""

    name: str
    gpus: tuple[int, ...]
    ranks: dict[int, dict] = field(default_factory=dict)  # gpu -> what its worker returned
    error: str | None = None  # the worker group failed (a hang, a crash): every GPU's figures fail with it
    failure: Any = None  # the launcher's failures.GroupFailure behind `error`
    wall_s: float = 0.0
    sampling: Sampling | None = None  # sustained only, on GPUs: NVML beside the load
    # The workers' start when this phase started them (its seconds are part of wall_s): seconds, and per
    # rank whether it was a spare worker and how long that one had imported and waited (workers.spares).
    group_start: dict | None = None

    def of(self, gpu: int) -> dict | None:
        return self.ranks.get(gpu)


@dataclass
class GpuRun:
    """What the checks need beyond the figures: which GPUs, what they are, who else used them."""

    gpus: tuple[int, ...]
    simulated: bool
    names: dict[int, str | None]  # NVML's model name per GPU (the floors' key)
    bus_ids: dict[int, str | None]
    foreign_processes: dict[int, list] = field(default_factory=dict)  # gpu -> [[pid, name, bytes]] before the load
    foreign_error: str | None = None
    # gpu -> wirecheck.node.hardware.Hardware.as_dict(): the peaks a model without floors is held to.
    hardware: dict[int, dict] = field(default_factory=dict)


class GpuLoad:
    """The run's GPU load. `settings`: the thresholds' GpuHealthSettings for this mode."""

    def __init__(self, run: GpuRun, settings, level: str, log_dir: str | Path | None = None,
                 pool: WorkerPool | None = None, aside: dict | None = None):
        """`pool`: where the phases run (wirecheck.workers.pool: its ranks of the run's GPUs, idle
        meanwhile; its processes are no foreign processes on the GPUs); where it cannot serve them, or
        without one, a group of the load's own. `aside`: the first rank's next work, prepared in the
        sustained load's shadow ({"function": "module:function", "kwargs": ...}: gpu/worker.py `sustained`)."""
        self.aside = aside
        self.pool = pool
        self.run = run
        self.settings = settings
        self.level = level
        self.log_dir = log_dir
        self.phases: dict[tuple[str, str], Phase] = {}
        self._group: WorkerGroup | None = None
        self._foreign_read = False

    def phase(self, name: str, workers: str = WORKERS) -> Phase:
        key = (name, workers)
        if key not in self.phases:
            self.phases[key] = self._measure(name, workers)
        return self.phases[key]

    def close(self) -> None:
        if self._group is not None:
            self._group.close()
            self._group = None

    # -- measuring ----------------------------------------------------------------------------

    def kwargs(self, name: str) -> dict:
        """What the phase's worker function is called with (recorded with its figures)."""
        return self._kwargs_and_deadline(name)[0]

    def _kwargs_and_deadline(self, name: str) -> tuple[dict, float]:
        s = self.settings
        if name == FIGURES:
            return s.figures_kwargs(self.level), s.timeout_s
        if name == SUSTAINED:
            kwargs = s.sustained_kwargs(self.level)
            if self.aside:
                kwargs = {**kwargs, "aside": self.aside}
            return kwargs, kwargs["duration_s"] + s.timeout_s
        return s.memory_kwargs(self.level), s.timeout_s

    def _read_foreign(self) -> None:
        """Compute processes on the run's GPUs now, before any worker of ours holds them."""
        if self._foreign_read or self.run.simulated:
            return
        self._foreign_read = True
        try:
            health = {h.index: h for h in nvml.read_health()}
        except nvml.NvmlUnavailable as exc:
            self.run.foreign_error = str(exc)
            return
        own = set(self.pool.pids if self.pool is not None else ())
        for g in self.run.gpus:
            procs = health[g].compute_processes if g in health else ()
            if nvml.is_supported(procs):
                self.run.foreign_processes[g] = [list(p) for p in procs if p[0] not in own]

    def _group_now(self) -> WorkerGroup:
        if self._group is None or not self._group.alive:
            self.close()
            self._group = self.pool.for_gpus(self.run.gpus, "gpu-health") if self.pool is not None else None
        if self._group is None:
            self._group = WorkerGroup(
                label="gpu-health",
                world_size=len(self.run.gpus),
                backend="gloo" if self.run.simulated else "nccl",
                gpus=None if self.run.simulated else self.run.gpus,
                join_process_group=False,  # every GPU on its own: no collective, no NCCL communicator
                log_dir=self.log_dir,
            )
        return self._group

    def _measure(self, name: str, workers: str) -> Phase:
        if name not in PHASES:
            raise ValueError(f"unknown GPU load phase {name!r}; known: {', '.join(PHASES)}")
        self._read_foreign()
        phase = Phase(name, self.run.gpus)
        hung = next((p for p in self.phases.values() if p.failure is not None and p.failure.kind == HUNG), None)
        if hung is not None:
            # as the worker pool retires a hung placement: a GPU that hung once would only hang again
            phase.error = f"not run: the {hung.name} phase hung earlier ({hung.error.splitlines()[0]})"
            return phase
        kwargs, deadline = self._kwargs_and_deadline(name)
        sampler = None
        t0 = time.monotonic()
        try:
            had = self._group
            group = self._group_now()
            if group is not had and isinstance(group, WorkerGroup):  # started here (a pool's sub-group was not)
                phase.group_start = group.start_record()
            if name == SUSTAINED and not self.run.simulated:
                sampler = LoadSampler(self.run.gpus, self.settings.sample_interval_s).start()
            values = group.run(f"{workers}:{name}", kwargs, timeout_s=deadline, what=f"GPU health {name}")
            phase.ranks = dict(zip(self.run.gpus, values))
        except WorkerError as exc:
            phase.error, phase.failure = str(exc), exc.failure
            self.close()
        finally:
            if sampler is not None:
                phase.sampling = sampler.stop()
            phase.wall_s = time.monotonic() - t0
        return phase
