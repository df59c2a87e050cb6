"""The probes' worker functions, run in every rank of one worker group on the suspect's placement:
`measure` (the collective on the whole placement, every element checked: measure.collectives' own)
and `pair` (the collective on two of its GPUs, on a process group of their own, while the others
wait). One group serves every pair, so a quad's six pairs cost one start, and the parent reads the
links' counters between two calls: one pair's load each.

A self-test swaps this module for one that injects faults (selftests/diagnose_faults.py): both
functions are named here once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from wirecheck.measure import collectives

if TYPE_CHECKING:
    from wirecheck.workers.worker import RankContext

WORKERS = "wirecheck.diagnose.worker"
MEASURE, PAIR = "measure", "pair"


def measure(ctx: RankContext, **kwargs: Any) -> dict[str, Any]:
    return collectives.measure(ctx, **kwargs)


def pair(ctx: RankContext, op: str, size: int, warmup_iters: int, iters: int, ranks: list[int]) -> dict[str, Any] | None:
    """`op` at `size` between the two job ranks `ranks` only; None on every other rank. Every rank makes
    the process group (new_group is collective over the job) and leaves it again."""
    import torch.distributed as dist

    group = dist.new_group(list(ranks))
    try:
        if ctx.rank not in ranks:
            return None
        result = collectives.measure_group(ctx, op, size, warmup_iters, iters, group, list(ranks))
        return {"rank": list(ranks).index(ctx.rank), "op": op, "world_size": len(ranks), "nccl_version": None,
                "results": [result]}
    finally:
        dist.barrier()  # the pair is done before any rank tears its group down
        dist.destroy_process_group(group)
