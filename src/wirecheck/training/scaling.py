"""One GPU alone as the strategy dial's baseline (parent side, no torch): the run, the settings it
is made with, and each strategy's scaling efficiency against it.

    scaling efficiency = (strategy tokens/s / GPUs) / one-GPU tokens/s

Both train the same model on the same micro-batch per GPU, so 1.0 is perfect data-parallel
scaling, and what a strategy loses below it is what distribution costs it (communication not
hidden under compute, waiting for the slowest rank, the strategy's own bookkeeping). The worker
side is training/single_gpu.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from wirecheck.node.placement import CLASS_SINGLE, Placement
from wirecheck.records.file import Measurement, env_switches
from wirecheck.training.figures import rank_mfu
from wirecheck.vocab.strategies import REFERENCE, strategy
from wirecheck.vocab import records as kinds

SINGLE_GPU_WORKER = "wirecheck.training.single_gpu:train_alone"
SINGLE_GPU_PREPARE = "wirecheck.training.single_gpu:prepare"  # its one-time work, ahead (the GPU load's aside)
PREPARED_ARGUMENTS = ("shape", "micro_batch", "precision", "optimizer")  # train_alone's that prepare takes


def single_gpu_kwargs(settings) -> dict:
    """train_alone's arguments from the thresholds' TrainingSettings: the strategies' own model,
    micro-batch, steps, seed and precision, and the reference strategy's optimizer implementation."""
    kwargs = settings.run_kwargs(REFERENCE)
    del kwargs["strategy"]
    kwargs["optimizer"] = strategy(REFERENCE).defaults()["optimizer"]
    return kwargs


def prepare_kwargs(train_kwargs: dict) -> dict:
    """The arguments of SINGLE_GPU_PREPARE: those of train_alone's (single_gpu_kwargs) that decide its kernels."""
    return {k: train_kwargs[k] for k in PREPARED_ARGUMENTS if k in train_kwargs}


def baseline_placement(placements: list[Placement]) -> Placement | None:
    """The one-GPU placement the baseline runs on: the first `single` placement of the run (GPU0,
    or the first GPU a --placement selection kept); None when the selection has none."""
    return next((p for p in placements if p.klass == CLASS_SINGLE), None)


def scaling_efficiency(tokens_per_s: float | None, n_gpus: int, single_gpu_tokens_per_s: float | None) -> float | None:
    """Tokens/s per GPU over one GPU's tokens/s (1.0: perfect scaling); None without both figures."""
    if not tokens_per_s or not single_gpu_tokens_per_s or n_gpus < 1:
        return None
    return tokens_per_s / n_gpus / single_gpu_tokens_per_s


@dataclass
class SingleGpuRun:
    """One GPU alone: the worker's record (one rank), or the group's failure."""

    placement: Placement
    ranks: list = field(default_factory=list)  # [the record of training/single_gpu.py]
    error: str | None = None
    failure: object = None  # the launcher's failures.GroupFailure behind `error`
    workers: str | None = None  # where it ran: "pool" (a one-GPU node's one worker) or "fresh" (a new process)

    @property
    def rank0(self) -> dict:
        return self.ranks[0]

    @property
    def tokens_per_s(self) -> float | None:
        return self.rank0["tokens_per_s"] if self.ranks else None

    def mfu(self, limits, precision: str) -> float | None:
        """6 x parameters x tokens/s over the GPU's dense peak (thresholds.yaml training.peak_flops)."""
        return rank_mfu(self.rank0, limits, precision) if self.ranks else None


def single_gpu_measurement(run: SingleGpuRun, kwargs: dict, timeout_s: float, thresholds, simulated: bool,
                           precision: str) -> Measurement:
    """The one-GPU run as the record keeps it: its record, the figures the check and the dial use, the settings."""
    figures = {}
    if run.ranks:
        limits = thresholds.training_limits(simulated)
        figures = {"tokens_per_s": run.tokens_per_s, "mfu": run.mfu(limits, precision),
                   "peak_allocated_bytes": run.rank0.get("peak_allocated_bytes")}
    return Measurement(
        kinds.SINGLE_GPU_TRAINING, run.placement.id, "one GPU alone: training steps", run.tokens_per_s, "tokens/s",
        {"n_gpus": 1, "workers": run.workers, "ranks": run.ranks, "error": run.error,
         "failure": run.failure.as_dict(message=False) if run.failure is not None else None,
         "figures": figures, "env": env_switches(run.placement.env), "simulated": simulated,
         "settings": {**kwargs, "timeout_s": timeout_s}})
