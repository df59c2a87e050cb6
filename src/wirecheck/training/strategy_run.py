"""One strategy's training steps on one placement, run on a fresh worker group and recorded.

The parent's side of training/runner.py: the arguments from the thresholds' training settings,
the run on a group of new processes (Accelerate and DeepSpeed keep process-global state), the
figures the checks read (`StrategyRun`), and the record's measurement. The suite's plugin caches
runs per session and asserts on them; nothing here knows pytest. Imports no torch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from wirecheck.node.placement import Placement
from wirecheck.records.file import Measurement, env_switches
from wirecheck.workers.launcher import WorkerError, WorkerGroup
from wirecheck.vocab import records as kinds

# The worker entry, spelled once (resolved in the worker through the package's lazy `run_strategy`,
# which is training.runner.run_strategy; this module keeps the name so the parent need not import it).
RUN_STRATEGY_WORKER = "wirecheck.training:run_strategy"


def workload_of(rank: dict) -> dict:
    """What a strategy run trained, from one rank's record (training.runner): the keys of
    TrainingSettings.workload(), the limits' own."""
    return {"shape": rank.get("shape"), "micro_batch": rank.get("micro_batch"), "precision": rank.get("precision")}


def median_of(rank: dict) -> dict:
    """How well one rank's record knows its median step time (training.timing): the 95 % interval's
    half-width as a share of the median, the timed steps, and what stopped them (settled or ceiling)."""
    return {"halfwidth": rank.get("step_time_ci_halfwidth"), "steps": rank.get("timed_steps"),
            "stop": rank.get("stop_reason")}


@dataclass
class StrategyRun:
    placement: Placement
    strategy: str
    ranks: list = field(default_factory=list)  # per-rank records from the worker
    error: str | None = None
    failure: object = None  # the launcher's failures.GroupFailure behind `error`
    workers: str | None = None  # "fresh": every strategy trains in new processes (run_on_fresh_group)

    @property
    def rank0(self) -> dict:
        return self.ranks[0]

    @property
    def workload(self) -> dict:
        """What was trained (model shape, tokens per GPU, precision): the limits' own workload or not."""
        return workload_of(self.rank0)

    @property
    def median(self) -> dict:
        """How well rank 0 knew its median step time (every rank times the same steps)."""
        return median_of(self.rank0)

    def worst(self, key: str):
        values = [r[key] for r in self.ranks if r.get(key) is not None]
        return max(values) if values else None

    @property
    def model_state_bytes(self) -> int:
        return max(sum(r["model_state_bytes"].values()) for r in self.ranks)

    @property
    def tokens_per_s(self) -> float:
        return min(r["tokens_per_s"] for r in self.ranks)

    @property
    def exposed_comm_s(self) -> float | None:
        """Step time not explained by the same step's compute alone (the smallest over ranks:
        the one least disturbed by its own local timing)."""
        values = [r["exposed_comm_s"] for r in self.ranks if r.get("exposed_comm_s") is not None]
        return min(values) if values else None

    def mfu(self, limits, precision: str) -> float | None:
        """6 x parameters x tokens/s over the GPU's dense peak (thresholds.yaml training.peak_flops)."""
        from wirecheck.training.figures import rank_mfu

        return rank_mfu(self.rank0, limits, precision)


class FreshGroups(Protocol):
    """Groups of new processes for one run, and what to do with a placement whose run failed."""

    def fresh(self, placement: Placement) -> WorkerGroup: ...

    def alone(self, gpus: tuple[int, ...], label: str): ...

    def failed(self, placement: Placement, error: WorkerError) -> None: ...


def strategy_arguments(settings, strategy: str, grad_hook: str | None, overrides: dict) -> tuple[dict, float]:
    """The worker's arguments and the run's timeout: the thresholds' training settings (`settings`:
    TrainingSettings) for `strategy`, changed by `overrides` (shape, warmup_steps, steps, max_steps,
    local_baseline, timeout_s: the capacity case)."""
    overrides = dict(overrides)
    kwargs = {**settings.run_kwargs(strategy), "grad_hook": grad_hook}
    timeout_s = overrides.pop("timeout_s", settings.timeout_s)
    kwargs.update(overrides)
    return kwargs, timeout_s


def run_on_fresh_group(groups: FreshGroups, run, worker: str, kwargs: dict, timeout_s: float, what: str,
                       may_share: bool = False):
    """`run` (a StrategyRun, a SingleGpuRun: placement, ranks, error, failure) filled by one call on a
    fresh group, closed after it. A group that fails to start is the run's failure too: kept in the run
    and handed to `groups.failed` (which may retire the placement).

    `may_share`: work that keeps no process-global state (one GPU's plain loop) runs in the pool's worker
    where that worker is alone on the run's GPU (`groups.alone`: a one-GPU node), not in a new process;
    `run.workers` says which ("pool" or "fresh")."""
    group, fresh = None, False
    try:
        group = groups.alone(run.placement.gpus, run.placement.id) if may_share else None
        if group is None:
            group, fresh = groups.fresh(run.placement), True
        run.workers = "fresh" if fresh else "pool"
        run.ranks = group.run(worker, kwargs, timeout_s=timeout_s, what=what)
    except WorkerError as exc:
        run.error, run.failure = str(exc), exc.failure
        groups.failed(run.placement, exc)
    finally:
        if group is not None and fresh:
            group.close()
    return run


def run_strategy_on(groups: FreshGroups, placement: Placement, strategy: str, kwargs: dict, timeout_s: float,
                    worker: str = RUN_STRATEGY_WORKER) -> StrategyRun:
    """One strategy's run on a fresh group (run_on_fresh_group)."""
    return run_on_fresh_group(groups, StrategyRun(placement, strategy), worker, kwargs, timeout_s,
                              f"{strategy} training steps")


def strategy_measurement(run: StrategyRun, kwargs: dict, timeout_s: float, thresholds, simulated: bool,
                         precision: str, extra_figures: dict | None = None) -> Measurement:
    """The run as the record keeps it: every rank's record, the figures the checks use (and
    `extra_figures`: the scaling against one GPU alone), the settings."""
    figures = {}
    if run.ranks:
        limits = thresholds.training_limits(simulated)
        figures = {"tokens_per_s": run.tokens_per_s, "mfu": run.mfu(limits, precision),
                   "exposed_comm_s": run.exposed_comm_s, "model_state_bytes": run.model_state_bytes,
                   "peak_allocated_bytes": run.worst("peak_allocated_bytes"),
                   "strategy_settings": run.rank0.get("settings"), **(extra_figures or {})}
    settings = {**kwargs, "timeout_s": timeout_s}
    handed = kwargs.get("local_baseline")
    if isinstance(handed, dict):  # the figures are in each rank's record already: say only whose they are
        settings["local_baseline"] = {"from": sorted(set(handed["from"].values()))}
    return Measurement(
        kinds.STRATEGY, run.placement.id, f"{run.strategy} training", run.tokens_per_s if run.ranks else None, "tokens/s",
        {"strategy": run.strategy, "n_gpus": run.placement.n_gpus, "ranks": run.ranks, "error": run.error,
         "failure": run.failure.as_dict(message=False) if run.failure is not None else None,
         "figures": figures, "env": env_switches(run.placement.env), "simulated": simulated, "settings": settings})
