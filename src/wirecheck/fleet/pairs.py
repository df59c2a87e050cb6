"""Worker side of the pair schedule: one all_reduce between the GPUs of two nodes, on their own
process group, timed and checked element by element.

`collectives.measure` runs on the default group (every GPU of the job); a pair runs on a subgroup so
that the disjoint pairs of one matching run at the same time. The data pattern and the expected sum
are collectives' own (`pattern`, `pattern_sum`), numbered by rank inside the pair's group.
Runs inside the ranks started by torchrun (wirecheck.fleet.multinode); the parent never calls it.
"""

from __future__ import annotations

import time
from typing import Any

import torch
import torch.distributed as dist

from wirecheck.measure import collectives
from wirecheck.workers.worker import RankContext

OP = "all_reduce"


def _fill(t: torch.Tensor, rank: int) -> None:
    for start in range(0, t.numel(), collectives.CHUNK_ELEMENTS):
        stop = min(start + collectives.CHUNK_ELEMENTS, t.numel())
        t[start:stop].copy_(collectives.pattern(rank, start, stop, t.device))


def _wrong(t: torch.Tensor, n: int) -> tuple[int, int | None]:
    wrong, first = 0, None
    for start in range(0, t.numel(), collectives.CHUNK_ELEMENTS):
        stop = min(start + collectives.CHUNK_ELEMENTS, t.numel())
        bad = t[start:stop] != collectives.pattern_sum(n, start, stop, t.device)
        k = int(bad.sum())
        if k:
            wrong += k
            if first is None:
                first = start + int(bad.to(torch.int32).argmax())
    return wrong, first


def _line_up(ctx: RankContext, group) -> None:
    if ctx.device.type == "cuda":
        dist.barrier(group=group, device_ids=[ctx.device.index])
        torch.cuda.synchronize(ctx.device)
    else:
        dist.barrier(group=group)


def measure_pair(ctx: RankContext, group, group_ranks: list[int], size: int, warmup_iters: int,
                 iters: int) -> dict[str, Any]:
    """`iters` back-to-back all_reduces of `size` bytes among `group_ranks` (this rank among them):
    mean seconds per call on this rank, and the wrong elements of one checked call."""
    n = len(group_ranks)
    me = group_ranks.index(ctx.rank)
    count = collectives.buffer_elements(OP, size, n)
    buf = torch.empty(count, dtype=collectives.DTYPE, device=ctx.device)
    try:
        _fill(buf, me)
        for _ in range(warmup_iters):
            dist.all_reduce(buf, group=group)
        _line_up(ctx, group)
        if ctx.device.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(iters):
                dist.all_reduce(buf, group=group)
            end.record()
            end.synchronize()
            time_s = start.elapsed_time(end) / 1e3 / iters
        else:
            t0 = time.perf_counter()
            for _ in range(iters):
                dist.all_reduce(buf, group=group)
            time_s = (time.perf_counter() - t0) / iters
        _fill(buf, me)  # in place: the timed calls overwrote it
        dist.all_reduce(buf, group=group)
        if ctx.device.type == "cuda":
            torch.cuda.synchronize(ctx.device)
        wrong, first_bad = _wrong(buf, n)
    finally:
        del buf
        if ctx.device.type == "cuda":
            torch.cuda.empty_cache()
    return {"rank": ctx.rank, "group_rank": me, "group_size": n, "bytes": count * collectives.ELEMENT_BYTES,
            "requested_bytes": size, "time_s": time_s, "wrong": wrong, "first_bad": first_bad}
