"""The probes' worker functions, run in every rank of one worker group on the suspect's placement:
`measure` (the collective on the whole placement, every element checked: measure.collective_worker's own)
and `pair` (the collective on two of its GPUs, on a process group of their own, while the others
wait). One group serves every pair, so a quad's six pairs cost one start, and the parent reads the
links' counters between two calls: one pair's load each.

A self-test swaps this module for one that injects faults (selftests/diagnose_faults.py): both
functions are named here once.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from wirecheck.measure import collective_worker

if TYPE_CHECKING:
    from wirecheck.workers.worker import RankContext

# Named for the parent in wirecheck.diagnose.context (WORKERS, MEASURE, PAIR), which imports no torch.


def measure(ctx: RankContext, **kwargs: Any) -> dict[str, Any]:
    return collective_worker.measure(ctx, **kwargs)


# The most of this rank's NCCL log one pair call hands back (a pair's communicator logs a few kB).
NCCL_LOG_BYTES = 256 * 1024


def _nccl_log_size() -> tuple[str | None, int]:
    """This process's NCCL log (NCCL_DEBUG_FILE, %p its pid) and its size now; (None, 0) without one."""
    template = os.environ.get("NCCL_DEBUG_FILE")
    if not template:
        return None, 0
    path = template.replace("%p", str(os.getpid()))
    try:
        return path, os.path.getsize(path)
    except OSError:
        return path, 0


def _nccl_log_since(path: str | None, offset: int) -> str | None:
    """What NCCL wrote to its log since `offset`: the lines of the pair's own communicator."""
    if path is None:
        return None
    try:
        with open(path, "rb") as fh:
            fh.seek(offset)
            return fh.read(NCCL_LOG_BYTES).decode("utf-8", "replace")
    except OSError:
        return None


def pair(ctx: RankContext, op: str, size: int, warmup_iters: int, iters: int, ranks: list[int]) -> dict[str, Any] | None:
    """`op` at `size` between the two job ranks `ranks` only; None on every other rank. Every rank makes
    the process group (new_group is collective over the job) and leaves it again. With NCCL logging on
    (the probe's group sets it on GPUs), the log lines of the pair's communicator come back too: the
    path NCCL took between the two."""
    import torch.distributed as dist

    log, offset = _nccl_log_size()
    group = dist.new_group(list(ranks))
    try:
        if ctx.rank not in ranks:
            return None
        result = collective_worker.measure_group(ctx, op, size, warmup_iters, iters, group, list(ranks))
        return {"rank": list(ranks).index(ctx.rank), "op": op, "world_size": len(ranks), "nccl_version": None,
                "results": [result], "nccl_log": _nccl_log_since(log, offset)}
    finally:
        dist.barrier()  # the pair is done before any rank tears its group down
        dist.destroy_process_group(group)
