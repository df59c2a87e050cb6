"""Worker side of the pair schedule: one all_reduce between the GPUs of two nodes, on their own
process group, timed and checked element by element.

`collective_worker.measure` runs on the default group (every GPU of the job); a pair runs on a subgroup so
that the disjoint pairs of one matching run at the same time. Filling, timing and checking are the
collectives' own (`collective_worker.measure_group`), numbered by rank inside the pair's group.
Runs inside the ranks started by torchrun (wirecheck.fleet.multinode); the parent never calls it.
"""

from __future__ import annotations

from typing import Any

from wirecheck.measure import collective_worker
from wirecheck.workers.worker import RankContext

OP = "all_reduce"
MEASURE_PAIR_WORKER = "wirecheck.fleet.pairs:measure_pair"  # the entry name, spelled once


def measure_pair(ctx: RankContext, group, group_ranks: list[int], size: int, warmup_iters: int,
                 iters: int) -> dict[str, Any]:
    """`iters` back-to-back all_reduces of `size` bytes among `group_ranks` (this rank among them), as a
    `collective_worker.measure` record of the pair's group ("rank" is the rank inside the pair, "job_rank" the
    job's), so that `collectives.combine` reads it: mean seconds per call on this rank and the wrong
    elements of one checked call."""
    result = collective_worker.measure_group(ctx, OP, size, warmup_iters, iters, group, group_ranks)
    return {"rank": group_ranks.index(ctx.rank), "job_rank": ctx.rank, "op": OP, "world_size": len(group_ranks),
            "results": [result]}
