"""A collective over a size sweep on one placement's worker group, each size recorded as it comes.

The one measure-and-record loop: the suite's plugin (its session cache of sweeps) and `wirecheck
nccl-tests` (the suite's side of the comparison) both run `run_sweep`; rank 0 of
`wirecheck.fleet.multinode`, which measures inside torchrun's ranks rather than on a worker group,
records its sizes with the same `size_measurement`. One size per worker call: a hang costs one
size's deadline, and the sizes measured before it are kept.

The sizes run on a worker pool the caller owns and hands in (wirecheck.workers.pool: the pytest
plugin's for the run, nccl-tests' for the command): the placement's sub-group, each size's deadline
from the pool, and the pool told when a size failed (a hang retires the placement's wire). The size
sweep's benchmark rounds (`benchmark_round`; `swept_round`, the one the sweep timed itself) and the deadline
rule from the thresholds' busbw floors (`floor_deadlines`) are here too.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Protocol

from wirecheck.core.quantity import format_bytes
from wirecheck.measure import collectives
from wirecheck.measure.collectives import MEASURE_LOOP_WORKER, MEASURE_WORKER, SizeResult
from wirecheck.node.placement import Placement
from wirecheck.records.file import Measurement, env_switches
from wirecheck.vocab.ops import Axes, axes as op_axes, busbw_factor, feasible_sizes
from wirecheck.workers import deadlines
from wirecheck.workers.launcher import WorkerError
from wirecheck.workers.pool import Deadlines, WorkerPool
from wirecheck.vocab import records as kinds


@dataclass
class Sweep:
    """One collective on one placement over the size sweep (slowest rank counts), at one dtype and
    reduction (`axes`: the op's first unless asked)."""

    placement: Placement
    op: str
    results: list = field(default_factory=list)  # collectives.SizeResult per size, in order
    error: str | None = None  # set when a size hung or crashed; results hold what was measured before
    failure: object = None  # the launcher's failures.GroupFailure behind `error`
    nccl_version: str | None = None
    axes: Axes | None = None  # None: the op's own dtype and reduction
    refused: str | None = None  # the backend refuses this dtype or reduction (nothing measured): why

    def at(self, size: int):
        for r in self.results:
            if r.requested_bytes == size:  # all_gather & co round down to n chunks of 16 bytes
                return r
        return None


class Recorder(Protocol):
    def measurement(self, m: Measurement) -> None: ...


def calls_per_size(settings, size: int) -> int:
    """Collectives one `collective_worker.measure` call makes at `size`: warm-up, timed, the checked pass,
    and, where sizes up to graph_up_to are graph-timed, the captured calls replayed (one warm replay,
    graph_replays timed) and the checked replay."""
    eager = settings.warmup_iters + settings.iters + 1
    graph_up_to = getattr(settings, "graph_up_to", None)
    if graph_up_to is None or size > graph_up_to:
        return eager
    return eager + settings.iters * (1 + getattr(settings, "graph_replays", 1)) + 1


def measure_kwargs(op: str, size: int, settings, graphs: bool = True, axes: Axes | None = None) -> dict:
    """The worker function's arguments for one size, from the thresholds' collective settings;
    graphs=False times eager calls only (no graph note either); `axes` past the op's first add their
    dtype and reduction (the op's own measurement passes neither, as before the axes)."""
    kwargs = {"op": op, "sizes": [size], "warmup_iters": settings.warmup_iters, "iters": settings.iters,
              "graph_up_to": settings.graph_up_to if graphs else None, "graph_replays": settings.graph_replays}
    if axes is not None and not axes.first:
        kwargs.update(dtype=axes.dtype, reduction=axes.reduction)
    return kwargs


def sweep_context(placement: Placement, backend: str, simulated: bool) -> dict:
    """What every size record of a placement's sweep says about where it ran."""
    return {"placement_class": placement.klass, "n_gpus": placement.n_gpus, "backend": backend,
            "env": env_switches(placement.env), "simulated": simulated}


def size_measurement(where: str, op: str, result: SizeResult, ranks: list[dict], index: int,
                     context: dict) -> Measurement:
    """One measured size as the record keeps it: busbw in GB/s, the combined result (its dtype and
    reduction among them), the NCCL version and every rank's time; `ranks` are the per-rank
    `collective_worker.measure` records, `index` the size's place in them."""
    details = {"op": op, **context, **asdict(result), "nccl_version": ranks[0].get("nccl_version"),
               "rank_time_s": [r["results"][index]["time_s"] for r in ranks]}
    return Measurement(kinds.COLLECTIVE, where, f"{result.axes.words} busbw at {format_bytes(result.bytes)}",
                       result.busbw / 1e9, "GB/s", details)


def size_failure(where: str, axes: Axes, size: int, error: WorkerError, context: dict) -> Measurement:
    """A size that hung or crashed, with the evidence's summary (stacks and logs stay with the failure)."""
    failure = error.failure
    details = {"op": axes.op, "dtype": axes.dtype, "reduction": axes.reduction, **context, "bytes": size,
               "error": str(error), "failure": failure.as_dict(message=False) if failure is not None else None}
    return Measurement(kinds.COLLECTIVE, where, f"{axes.words} at {format_bytes(size)}", None, "GB/s", details)


def run_sweep(pool: WorkerPool, placement: Placement, op: str, sizes, settings, *, worker: str = MEASURE_WORKER,
              graphs: bool = True, record: Recorder | None = None, context: dict | None = None,
              axes: Axes | None = None) -> Sweep:
    """`op` at each size of `sizes` that it can run on the placement, one worker call per size on the
    placement's sub-group of `pool`, at `axes` (None: the op's own dtype and reduction); each size is recorded
    (with `record`) the moment it is measured. The first size that fails ends the sweep: the pool is told
    (`pool.failed`) and the sweep keeps the error. A dtype or reduction the backend refuses ends it too,
    measured nothing, with the reason in `refused`. A placement the pool will not run raises
    wirecheck.workers.pool.Unavailable."""
    context = context or {}
    a = axes or op_axes(op)
    sweep = Sweep(placement, op, axes=axes)
    for size in feasible_sizes(op, sizes, placement.n_gpus, a.dtype):
        try:
            group = pool.shared(placement)
            ranks = group.run(worker, measure_kwargs(op, size, settings, graphs, axes),
                              timeout_s=pool.collective_deadline(placement, op, size, calls_per_size(settings, size)),
                              what=f"{a.words} at {format_bytes(size)}")
        except WorkerError as exc:
            pool.failed(placement, exc)
            sweep.error, sweep.failure = str(exc), exc.failure
            if record is not None:
                record.measurement(size_failure(placement.id, a, size, exc, context))
            break
        if ranks[0].get("refused"):
            sweep.refused = ranks[0]["refused"]
            break
        (result,) = collectives.combine(op, placement.n_gpus, ranks)
        sweep.nccl_version = ranks[0].get("nccl_version")
        sweep.results.append(result)
        if record is not None:
            record.measurement(size_measurement(placement.id, op, result, ranks, 0, context))
    return sweep


def benchmark_round(pool: WorkerPool, placement: Placement, op: str, size: int, settings) -> float:
    """One benchmark round for nightly regression: `settings.iters` back-to-back collectives of `size` on the
    placement's sub-group, timed on the device; the slowest rank's seconds for all of them."""
    ranks = pool.shared(placement).run(
        MEASURE_LOOP_WORKER, {"op": op, "size": size, "iters": settings.iters},
        timeout_s=pool.collective_deadline(placement, op, size, settings.iters + 1),
        what=f"{op} benchmark at {format_bytes(size)}")
    return max(r["time_s"] for r in ranks) * settings.iters


def swept_round(result: collectives.SizeResult, settings) -> float:
    """The benchmark round a sweep has timed already at a size: its `settings.iters` eager calls there, the
    slowest rank's seconds for all of them, as `benchmark_round` times a round (better warmed: the sweep's
    `warmup_iters` went before them)."""
    return result.eager_time_s * settings.iters


def floor_deadlines(thresholds, simulated: bool) -> Deadlines:
    """How long collectives may take (wirecheck.workers.deadlines): from the placement class's busbw floor,
    or the slowest floor in the thresholds where it has none; what a pool of the suite's run is given."""

    def deadline(placement: Placement, op: str, size_bytes: int, calls: int) -> deadlines.Deadline:
        floor = thresholds.busbw_limit(placement.klass, op, placement.n_gpus, simulated)
        floor_what = f"{placement.klass} floor"
        if floor is None or not floor.min:
            floor, floor_what = thresholds.slowest_busbw_floor(op, simulated), "slowest floor in the thresholds"
        return deadlines.collective_deadline(
            thresholds.workers.deadline_rule(simulated), thresholds.collective_settings(simulated).timeout_s, op,
            size_bytes, busbw_factor(op, placement.n_gpus), calls, floor.min if floor else None, floor_what)

    return deadline
