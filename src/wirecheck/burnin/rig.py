"""The burn-in's hands on the node: its worker group, NVML (samples, ECC and link counters), the XID
watch, and the folder its workers and the parent share (the stop file, each rank's progress).

The run's worker pool (wirecheck.workers.pool), over exactly the burn-in's GPUs and joined in one process
group, serves every call: a round (wirecheck.burnin.worker.load_round: the GEMM load beside the collective
cycle, each step on the pool's sub-group of its placement) and, between rounds, the memory test
(wirecheck.gpu.worker.memory). The pool is closed when the burn-in ends (its workers hold the load's
matrices), and the run's next test starts it again. A round runs in a thread of the parent, so that the
loop (wirecheck.burnin.loop) keeps watching XIDs, the stop file and each rank's progress while it
runs, and so that Ctrl-C lands in the loop, never inside the launcher's wait (which would kill the
ranks and lose the round's windows): the loop writes the stop file instead, and the round comes back
within about one window with everything it measured.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

from wirecheck.burnin.plan import BurnInPlan
from wirecheck.measure.sweep import calls_per_size
from wirecheck.node import nvml
from wirecheck.node.gpu_sampling import LoadSampler, Sampling
from wirecheck.workers.launcher import WorkerError
from wirecheck.workers.pool import WorkerPool
from wirecheck.workers.subgroups import SubGroup
from wirecheck.core.threads import start_helper

WORKERS = "wirecheck.burnin.worker"  # the module with the worker functions load_round and memory
STOP_FILE = "stop"


class RoundCall:
    """One round's worker call, running in a thread: `wait`, then `values` (or `error`, its WorkerError)."""

    def __init__(self, group: SubGroup, fn: str, kwargs: dict, timeout_s: float, what: str):
        self.values: list | None = None
        self.error: WorkerError | None = None
        self.started = time.time()
        # An event of our own, not Thread.join/is_alive: on Python 3.11 a join interrupted by Ctrl-C can
        # leave is_alive() False while the thread still runs (CPython gh-90882).
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(group, fn, kwargs, timeout_s, what),
                                        name="wirecheck-burn-in-round", daemon=True)
        start_helper(self._thread)

    def _run(self, group, fn, kwargs, timeout_s, what) -> None:
        try:
            self.values = group.run(fn, kwargs, timeout_s=timeout_s, what=what)
        except WorkerError as exc:
            self.error = exc
        finally:
            self._done.set()

    def wait(self, timeout_s: float) -> bool:
        """True once the call has returned (or failed)."""
        return self._done.wait(timeout_s)

    @property
    def done(self) -> bool:
        return self._done.is_set()


@dataclass(frozen=True)
class Progress:
    """What a rank last said it was doing, and since when (unix time)."""

    rank: int
    since: float
    doing: str


class Rig:
    """The real one; a self-test gives the loop a fake with the same methods."""

    def __init__(self, plan: BurnInPlan, settings, pool: WorkerPool, *, xid_events: Callable[[], list] | None = None,
                 log_dir: str | os.PathLike | None = None, workers: str = WORKERS, collective_settings=None):
        self.plan = plan
        self.pool = pool  # wirecheck.workers.pool.WorkerPool: the workers, and how long a step's collectives may take
        self.settings = settings  # the thresholds' GpuHealthSettings for the mode
        self.collective_settings = collective_settings
        self.round_worker, self.memory_worker = f"{workers}:load_round", f"{workers}:memory"
        self._xid_events = xid_events or (lambda: [])
        self.log_dir = log_dir
        if log_dir is not None:
            os.makedirs(log_dir, exist_ok=True)
        # mkdtemp: this user's own folder (0700): no other user can plant the stop file or a progress file
        self.shared = tempfile.mkdtemp(prefix="burn-in-", dir=log_dir)
        self.stop_path = os.path.join(self.shared, STOP_FILE)
        self.group: SubGroup | None = None

    # -- workers ------------------------------------------------------------------------------
    def start(self) -> None:
        self.group = self.pool.over(self.plan.gpus, "burn-in")

    def start_round(self, number: int, round_s: float, first_step: int) -> RoundCall:
        s, c = self.settings, self.collective_settings
        kwargs = {"n": s.gemm_n, "duration_s": round_s, "window_s": s.window_s, "check_every": s.check_every,
                  "seed": s.seed, "steps": [step.as_worker_arg(self.plan.gpus) for step in self.plan.steps],
                  "first_step": first_step, "warmup_iters": c.warmup_iters if c else 1, "iters": c.iters if c else 1,
                  "stop_path": self.stop_path, "progress_dir": self.shared}
        for name in os.listdir(self.shared):  # a new round: the last one's progress is history
            if name.startswith("rank"):
                os.unlink(os.path.join(self.shared, name))
        return RoundCall(self.group, self.round_worker, kwargs, round_s + self.allowance_s(number == 1),
                         f"burn-in round {number}")

    def allowance_s(self, first: bool) -> float:
        """How long a round may overrun its duration before it counts as hung: the slowest step's deadline
        (a step started just before the end), or a few windows; the first round also makes every
        placement's process group and the reference product, so it gets the GPU-health call timeout."""
        s = self.settings
        if first or self.collective_settings is None:
            return s.timeout_s
        return max([4 * s.window_s] + [self.step_deadline_s(step) for step in self.plan.steps]) + 4 * s.window_s

    def step_deadline_s(self, step) -> float:
        """Seconds one step of the cycle may take: its collectives' deadline from the pool (workers.deadlines'
        rule, from the class's busbw floor), for the calls one measure of the floor size makes."""
        c = self.collective_settings
        deadline = self.pool.collective_deadline(step.placement, step.op, step.size, calls_per_size(c, c.floor_size))
        return float(getattr(deadline, "seconds", deadline))

    def memory(self) -> list:
        kwargs = self.settings.memory_kwargs("burn_in")
        kwargs["passes"] = self.plan.memory_passes
        return self.group.run(self.memory_worker, kwargs, timeout_s=self.settings.timeout_s,
                              what="burn-in memory test")

    def close(self) -> None:
        self.group = None
        self.pool.close()
        shutil.rmtree(self.shared, ignore_errors=True)

    # -- the shared folder ---------------------------------------------------------------------
    def request_stop(self, why: str) -> None:
        if not os.path.exists(self.stop_path):
            with open(self.stop_path, "a", encoding="utf-8") as f:
                f.write(f"parent: {why}\n")

    def clear_stop(self) -> None:
        try:
            os.unlink(self.stop_path)
        except FileNotFoundError:
            pass

    def progress(self) -> list[Progress]:
        out = []
        for rank in range(len(self.plan.gpus)):
            try:
                with open(os.path.join(self.shared, f"rank{rank}"), encoding="utf-8") as f:
                    since, _, doing = f.read().strip().partition(" ")
                out.append(Progress(rank, float(since), doing))
            except (FileNotFoundError, ValueError):
                continue
        return out

    # -- NVML ----------------------------------------------------------------------------------
    def start_sampling(self) -> LoadSampler | None:
        if self.plan.simulated:
            return None
        return LoadSampler(self.plan.gpus, self.settings.sample_interval_s).start()

    @staticmethod
    def stop_sampling(sampler: LoadSampler | None) -> Sampling | None:
        return sampler.stop() if sampler is not None else None

    def health(self) -> dict[int, Any] | None:
        """One NVML health reading per GPU (ECC, remapped rows, link counters); None in simulation."""
        if self.plan.simulated:
            return None
        try:
            return {h.index: h for h in nvml.read_health() if h.index in self.plan.gpus}
        except nvml.NvmlUnavailable:
            return None

    def xid_events(self) -> list[dict]:
        return list(self._xid_events())
