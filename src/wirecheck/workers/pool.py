"""The worker pool: one worker per GPU, started at the first call that needs one and kept, a
torch.distributed sub-group per placement (wirecheck.workers.subgroups), handed to whatever measures:
the size sweep and its benchmark rounds (wirecheck.measure.sweep), the strategy runs
(wirecheck.training.strategy_run), the GPU load (wirecheck.gpu.load), the burn-in (wirecheck.burnin.rig),
nccl-tests' suite side (wirecheck.nccl.tests) and diagnose's probes. None of them starts a group of its
own where the pool can serve it; the owner (the pytest plugin for a run, a command for its own work)
makes the pool and closes it.

A pool is one WorkerGroup over the GPUs of every placement that shares its environment, joined in one
process group, with a sub-group per placement made at its start: every collective, benchmark round and
NCCL path reading of those placements runs on it. A placement whose environment differs (forced_pcie:
NCCL_P2P_DISABLE, which NCCL reads once per process) gets a pool of its own environment; one pool holds
the GPUs at a time. Training strategies get fresh processes (`fresh`: DeepSpeed and Accelerate keep
process-global state), and so does whatever closes the pool to have the GPUs alone (the copy bandwidth,
the NVML readings that must not see the suite's own processes), except on a one-GPU node: there the pool is
the GPU's one worker, and the copies and one GPU's training run in it (`alone`), two process starts saved.

A failed call ends the pool (its workers are killed with the failure's evidence); the next call starts
a new one. A hang also retires the wire: the placement's further work is `Unavailable`, naming the hang
(a node whose broken link hangs every collective then finishes in minutes, every hang named).

Parent side only: no torch here.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from wirecheck.core.failures import HUNG, GroupFailure
from wirecheck.workers import ras
from wirecheck.workers.deadlines import Deadline
from wirecheck.workers.errors import WorkerError
from wirecheck.workers.launcher import WorkerGroup
from wirecheck.workers.subgroups import MAKE_WORKER, SubGroup

# One CPU process per simulated GPU: more than this would only measure the scheduler.
MAX_SIMULATED_RANKS = 8
# Each training rank imports torch, Accelerate and DeepSpeed and sets up its engine (~3 s of
# CPU before the first step): beyond 2 ranks a simulated run mostly queues on a small
# machine's cores (4-rank placements took 2x the time of 2-rank ones for the same checks).
MAX_SIMULATED_TRAINING_RANKS = 2
# Seconds a pool's start may take per sub-group beyond the call timeout: each is a new communicator
# (NCCL's init and its first connections), made by every rank in turn.
PER_GROUP_S = 5.0


class Unavailable(Exception):
    """Work the pool will not run on a placement, and why: its wire hung earlier, or a simulation would need
    more CPU ranks than it runs. Not a verdict on the node: the pytest plugin skips the test that asked,
    with this message."""


@dataclass(frozen=True)
class Start:
    """What a pool's ranks run when it starts: the worker function that makes every sub-group (in the
    order given, on every rank), its other arguments, the environment the start adds (NCCL's log of the
    communicators' set-up: wirecheck.nccl.path.logging_start), and what the pool keeps of the ranks'
    answers for each placement it made (`keep(answers, ranks by placement id)` -> {placement id: ...},
    in `WorkerPool.kept` across the pool's restarts: where each rank's NCCL log of the placement's
    communicator is)."""

    worker: str = MAKE_WORKER
    kwargs: dict = field(default_factory=dict)
    env: dict = field(default_factory=dict)
    keep: Callable[[list, dict], dict] | None = None


# (placement, op, size in bytes, calls) -> how long those calls may take (wirecheck.measure.sweep's
# floor_deadlines: from the class's busbw floor; a command without floors: one fixed timeout).
Deadlines = Callable[[Any, str, int, int], "Deadline | float"]


class WorkerPool:
    """Worker processes for one owner's work, one per GPU, kept between calls.

    `placements`: those whose ranks the pool may group (the collective placements of the node); `used`:
    the placement ids its work will ask for (None: every one), so that a narrow selection starts a small
    pool; `timeout_s`: the call timeout a start's allowance adds to; `deadline`: how long collectives may
    take (the default: `timeout_s`); `starting(n)`: the n-th start's `Start` (default: make the sub-groups
    only); `log_dir`: where failed groups' logs stay (None: the system's temp dir).
    """

    def __init__(self, placements, *, backend: str, simulated: bool, timeout_s: float,
                 deadline: Deadlines | None = None, starting: Callable[[int], Start] | None = None,
                 log_dir: str | Path | None = None, used: set[str] | None = None):
        self.placements = list(placements)
        self.backend = backend
        self.simulated = simulated
        self.timeout_s = timeout_s
        self.deadline = deadline
        self.starting = starting or (lambda n: Start())
        self.log_dir = log_dir
        self.used = used
        self.hung: dict[tuple, GroupFailure] = {}  # wire_key(placement) -> the hang that retired it
        self.starts = 0  # pools started (the plan's worker_group_start count)
        self.kept: dict[str, Any] = {}  # placement id -> what the last start that made it kept (Start.keep)
        self._group: WorkerGroup | None = None
        self._env: tuple | None = None  # the running pool's environment, as env_key gives it
        self._gpus: tuple[int, ...] = ()  # the GPUs of its ranks, in rank order
        self._made: set[str] = set()  # the placements whose sub-groups it made

    # -- what callers ask for -----------------------------------------------------------------
    def shared(self, placement) -> SubGroup:
        """The placement's ranks in the pool (started, or restarted for another environment, here)."""
        self.check(placement)
        if not self._running(env_key(placement)) or placement.id not in self._made:
            self._start_for(placement)
        return SubGroup(self._group, ranks_in(self._gpus, placement), placement.id)

    def fresh(self, placement) -> WorkerGroup:
        """A group of new processes that join no process group (Accelerate/DeepSpeed do it).

        Training strategies keep process-global state, so each gets its own processes.
        The caller closes it. The pool is closed first so GPUs are not shared.
        """
        self.check(placement, MAX_SIMULATED_TRAINING_RANKS, "training on ")
        self.close()
        return WorkerGroup(label=placement.id, world_size=placement.n_gpus, backend=self.backend,
                           gpus=None if self.simulated else placement.gpus, env=placement.env,
                           join_process_group=False, log_dir=self.log_dir)

    def for_gpus(self, gpus: tuple[int, ...], label: str) -> SubGroup | None:
        """The pool's ranks of `gpus` for work of each GPU on its own (the GPU load): the pool without an
        environment of its own, started here if another runs; None where it does not cover every GPU
        of `gpus` (the caller then starts workers of its own)."""
        base = next((p for p in self._groupable() if not p.env), None)
        if base is None and not self._groupable():
            # A node without collective placements (one GPU): a pool over `gpus` alone serves the load and
            # stays for the work after it that needs the GPU alone (`alone`: the copies, one GPU's training).
            return self.over(gpus, label)
        if base is None:
            self.close()
            return None
        covered = {g for p in self._groupable() if env_key(p) == env_key(base) for g in p.gpus}
        if not set(gpus) <= covered:
            self.close()  # the caller's own workers have the GPUs alone
            return None
        if not self._running(env_key(base)):
            self._start_for(base)
        if not set(gpus) <= set(self._gpus):  # a small pool (a -k selection): one over every GPU the load needs
            self.used = None
            self._start_for(base)
        return SubGroup(self._group, tuple(self._gpus.index(g) for g in gpus), label, grouped=False)

    def alone(self, gpus: tuple[int, ...], label: str) -> SubGroup | None:
        """The running pool's one worker where the pool is one worker on exactly `gpus`, one GPU (a one-GPU
        node's pool, which the GPU load started): work that needs the GPU alone (the copies, one GPU's
        training) runs there, since no other process of ours holds it, instead of in a new process; None
        elsewhere (the caller closes the pool and starts workers of its own)."""
        gpus = tuple(gpus)
        if len(gpus) != 1 or self._group is None or not self._group.alive or self._gpus != gpus:
            return None
        return SubGroup(self._group, (0,), label, grouped=False)

    def over(self, gpus: tuple[int, ...], label: str) -> SubGroup:
        """Every rank of a pool over exactly `gpus` (rank r on gpus[r]) as one group, its job's process group
        theirs, for work whose collectives span them all (the burn-in: its round votes over all its GPUs, its
        steps run on the sub-groups of the placements inside them, made at the start): the running pool
        where it is that, else a pool started over them without an environment of its own."""
        gpus = tuple(gpus)
        if not (self._running(()) and self._gpus == gpus):
            inside = [p for p in self._groupable() if not p.env and set(p.gpus) <= set(gpus)]
            self._start(inside, {}, gpus, label)
        return SubGroup(self._group, tuple(range(len(gpus))), label, grouped=False)

    def ras_diagnostics(self, placement) -> dict:
        """NCCL RAS's readiness diagnostics of the pool's communicators (the pool for `placement`, started here
        when none runs), asked where the ranks' environment says RAS listens (wirecheck.workers.ras)."""
        self.shared(placement)
        return ras.ask_diagnostics({**os.environ, **self._group.env})

    def collective_deadline(self, placement, op: str, size_bytes: int, calls: int) -> Deadline | float:
        """How long `calls` collectives of `size_bytes` on `placement` may take (the owner's rule)."""
        if self.deadline is None:
            return self.timeout_s
        return self.deadline(placement, op, size_bytes, calls)

    def failed(self, placement, error: WorkerError) -> None:
        """After a failed call or start on `placement`: the pool goes (the next call starts a new one); a
        hang retires the placement's wire.

        Only a hang does: a rank that raised or died is reported and the next call gets fresh
        workers (a killed rank is not a broken wire); a hang means the wire or a GPU does not move
        data, and every further call there would only wait out its own deadline.
        """
        self.close()
        failure = error.failure
        if failure is not None and failure.kind == HUNG:
            self.hung.setdefault(wire_key(placement), failure)

    def check(self, placement, limit: int = MAX_SIMULATED_RANKS, what: str = "") -> None:
        """Unavailable where the placement's wire hung earlier, or a simulation would run it on too many ranks."""
        if wire_key(placement) in self.hung:
            raise Unavailable(retired_reason(self.hung[wire_key(placement)], placement))
        if self.simulated and placement.n_gpus > limit:
            raise Unavailable(f"{placement.id}: simulation runs {what}at most {limit} CPU ranks")

    @property
    def pids(self) -> list[int]:
        """The pool's worker processes now (none while no pool runs)."""
        return list(self._group.pids) if self._group is not None and self._group.alive else []

    def close(self) -> None:
        if self._group is not None:
            self._group.close()
        self._group, self._env, self._gpus, self._made = None, None, (), set()

    # -- the pool itself ----------------------------------------------------------------------
    def members(self, placement) -> list:
        """The placements a pool started for `placement` serves: those of its environment that the owner's
        work uses (`used`) or the running pool served, that the simulation's rank limit lets run, and
        `placement` itself; their GPUs are the pool's."""
        key = env_key(placement)
        members = [p for p in self._groupable() if env_key(p) == key
                   and (self.used is None or p.id in self.used or p.id in self._made)]
        return members if placement in members else [*members, placement]

    def _groupable(self) -> list:
        return [p for p in self.placements if not (self.simulated and p.n_gpus > MAX_SIMULATED_RANKS)]

    def _running(self, env: tuple) -> bool:
        return self._group is not None and self._group.alive and self._env == env

    def _start_for(self, placement) -> None:
        """A pool of the placement's environment over the GPUs of its members (`members`)."""
        members = self.members(placement)  # before close: a placement the running pool lacked joins those it had
        self._start(members, placement.env, tuple(sorted({g for p in members for g in p.gpus})), placement.id)

    def _start(self, members: list, env: dict, gpus: tuple[int, ...], label: str) -> None:
        self.close()
        groups = list(dict.fromkeys(ranks_in(gpus, p) for p in members))  # node order, each once
        start = self.starting(self.starts + 1)
        self.starts += 1
        # A pool of one worker (a one-GPU node's) has no one to talk to: no process group, which on a 1x H200 node
        # cost NCCL's start (0.24 s) and its end (0.35 s: scripts/device/exit_probe.py) for nothing.
        group = WorkerGroup(label=f"pool-{self.starts}", world_size=len(gpus), backend=self.backend,
                            gpus=None if self.simulated else gpus, env={**env, **start.env},
                            join_process_group=len(gpus) > 1, log_dir=self.log_dir)
        try:
            # Every rank makes every sub-group, in one order: new_group is collective over the whole job.
            answers = group.run(start.worker, {"groups": [list(g) for g in groups], **start.kwargs},
                                timeout_s=self.timeout_s + PER_GROUP_S * len(groups),
                                what=f"the pool's {len(groups)} sub-groups", label=label)
        except WorkerError:
            group.close()
            raise
        self._group, self._env, self._gpus = group, tuple(sorted(env.items())), gpus
        self._made = {p.id for p in members}
        if start.keep is not None:
            self.kept.update(start.keep(answers, {p.id: ranks_in(gpus, p) for p in members}))


def env_key(placement) -> tuple:
    """What a pool's processes are fixed to at their start: the placement's extra environment."""
    return tuple(sorted(placement.env.items()))


def ranks_in(gpus: tuple[int, ...], placement) -> tuple[int, ...]:
    """The placement's ranks in a pool over `gpus` (rank r runs GPU gpus[r]), in order, as new_group numbers them."""
    return tuple(sorted(gpus.index(g) for g in placement.gpus))


def wire_key(placement) -> tuple:
    """What a hang retires: the GPUs and the environment that picks NCCL's path. A per-link
    placement (pair-0.1) and a class placement on the same GPUs (nvswitch-2gpu-0.1) are one wire;
    forced_pcie-2gpu-0.1 (NCCL_P2P_DISABLE) is another."""
    return tuple(placement.gpus), tuple(sorted(placement.env.items()))


def retired_reason(failure: GroupFailure, placement=None) -> str:
    """Why work on a placement that hung before is not run: the hang, named."""
    where = failure.label
    if placement is not None and placement.id != failure.label:
        where = f"{placement.id}: the same GPUs and path as {failure.label}, which"
    return (f"{where} hung earlier ({failure.what} did not finish within {failure.deadline_s:g}s; "
            f"logs in {failure.log_dir}): its remaining tests are skipped")
