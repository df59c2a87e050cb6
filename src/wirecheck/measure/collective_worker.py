"""The collectives' worker side: each op's kernel (fill, expected values, launch), registered by op
name, and the worker functions that time and check them inside `launcher.WorkerGroup` ranks.

Only worker processes import this module, so it imports torch at the top. The ops' data (buffer
shape, busbw factor, dtypes and reductions, the nccl-tests binary) is wirecheck.vocab.ops; the
parent-side combiner is wirecheck.measure.collectives.

Data: every element carries a value that depends on the rank that produced it and on its index,
small integers so every sum is exact in float32 whatever order NCCL adds in. A wrong, stale (not
written) or misplaced element therefore differs from the expected value; outputs start as NaN
before the checked pass so an element the collective never wrote cannot pass.

Timing: on GPUs, sizes up to `graph_up_to` are timed twice, as eager calls and as the same calls
replayed from a CUDA graph (see wirecheck.measure.collective_timing); the parent keeps the faster
path per size and records both. Each timed path is checked element by element. gloo/CPU has eager
calls only.

An op whose row names its torch.distributed function and DATA rule (`torch=`, `data=`) gets its kernel
derived from the row (`derived`): no edit here. An op that is neither (broadcast, from its root) has
its own `register(Kernel(...))` here; importing this module fails for an op of the vocabulary without
a kernel, a kernel for an op the vocabulary does not have, or a second kernel of a name.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Callable

import torch
import torch.distributed as dist

from wirecheck.measure import collective_timing as timing
from wirecheck.measure.collectives import CAPTURE_FAILED_ELSEWHERE
from wirecheck.measure.curve import EAGER, GRAPH
from wirecheck.vocab import ops as vocab
from wirecheck.vocab.ops import ELEMENT_BYTES, buffer_elements

if TYPE_CHECKING:
    from wirecheck.workers.worker import RankContext

DTYPE = torch.float32  # vocab.DTYPE
# Element i of rank r holds ((i + RANK_STRIDE*r) mod PATTERN_MODULUS) + 1. Both primes: a shift by a
# chunk or a swap of two ranks' data changes the value. Values < 2^16 (see vocab.MAX_RANKS).
PATTERN_MODULUS = 65521
RANK_STRIDE = 7919
# Elements generated/compared at a time: keeps the checker's temporaries small next to 1 GiB buffers.
CHUNK_ELEMENTS = 1 << 24
BROADCAST_ROOT = 0
REDUCE_OPS = {"sum": dist.ReduceOp.SUM, "max": dist.ReduceOp.MAX, "min": dist.ReduceOp.MIN}

# ---- data ----------------------------------------------------------------------------------------


def _values(global_index: torch.Tensor, src_rank: torch.Tensor | int) -> torch.Tensor:
    return ((global_index + RANK_STRIDE * src_rank) % PATTERN_MODULUS + 1).to(DTYPE)


def _index(start: int, stop: int, device: torch.device) -> torch.Tensor:
    return torch.arange(start, stop, dtype=torch.int64, device=device)


def pattern(rank: int, start: int, stop: int, device: torch.device) -> torch.Tensor:
    """What rank `rank` puts at global elements [start, stop)."""
    return _values(_index(start, stop, device), rank)


def pattern_reduced(n: int, start: int, stop: int, device: torch.device, reduction: str = "sum") -> torch.Tensor:
    """The reduction over ranks 0..n-1 of their pattern at elements [start, stop): a correct result."""
    idx = _index(start, stop, device)
    total = None
    for r in range(n):
        mine = (idx + RANK_STRIDE * r) % PATTERN_MODULUS + 1
        if total is None:
            total = mine
        elif reduction == "sum":
            total = total + mine
        elif reduction == "max":
            total = torch.maximum(total, mine)
        else:
            total = torch.minimum(total, mine)
    return total.to(DTYPE)


def pattern_sum(n: int, start: int, stop: int, device: torch.device) -> torch.Tensor:
    """The sum over ranks 0..n-1 of their pattern at elements [start, stop): a correct all_reduce."""
    return pattern_reduced(n, start, stop, device, "sum")


def _fill_pattern(t: torch.Tensor, rank: int, offset: int) -> None:
    """t[j] = pattern of `rank` at global element offset + j, a chunk at a time."""
    for start in range(0, t.numel(), CHUNK_ELEMENTS):
        stop = min(start + CHUNK_ELEMENTS, t.numel())
        t[start:stop].copy_(pattern(rank, offset + start, offset + stop, t.device))


# Fillers: (input buffer, rank, world size). Expected: (start, stop, rank, n, count, device, reduction)
# -> the values output[start:stop] must hold on `rank`, where count is the size in elements.

def _fill_own(t: torch.Tensor, rank: int, n: int) -> None:
    _fill_pattern(t, rank, 0)


def _fill_own_chunk(t: torch.Tensor, rank: int, n: int) -> None:
    # all_gather input: this rank's chunk, numbered by its place in the gathered output.
    _fill_pattern(t, rank, rank * t.numel())


def _fill_broadcast(t: torch.Tensor, rank: int, n: int) -> None:
    if rank == BROADCAST_ROOT:
        _fill_pattern(t, rank, 0)
    else:
        t.fill_(math.nan)  # a receiver that never received keeps NaN, which never compares equal


def _expect_all_reduce(start: int, stop: int, rank: int, n: int, count: int, device: torch.device,
                       reduction: str | None = "sum") -> torch.Tensor:
    return pattern_reduced(n, start, stop, device, reduction or "sum")


def _expect_all_gather(start: int, stop: int, rank: int, n: int, count: int, device: torch.device,
                       reduction: str | None = None) -> torch.Tensor:
    idx = _index(start, stop, device)
    return _values(idx, idx // (count // n))


def _expect_reduce_scatter(start: int, stop: int, rank: int, n: int, count: int, device: torch.device,
                           reduction: str | None = "sum") -> torch.Tensor:
    offset = rank * (count // n)
    return pattern_reduced(n, offset + start, offset + stop, device, reduction or "sum")


def _expect_broadcast(start: int, stop: int, rank: int, n: int, count: int, device: torch.device,
                      reduction: str | None = None) -> torch.Tensor:
    return pattern(BROADCAST_ROOT, start, stop, device)


def _expect_all_to_all(start: int, stop: int, rank: int, n: int, count: int, device: torch.device,
                       reduction: str | None = None) -> torch.Tensor:
    # Output chunk s on rank r is chunk r of rank s's input.
    chunk = count // n
    idx = _index(start, stop, device)
    return _values(rank * chunk + idx % chunk, idx // chunk)


# Launchers read `dist.<op>` when called, so a test can swap an entry's launcher (or torch's own
# function) in a worker process. `group`: a process group of some of the job's ranks (measure_group);
# None, the whole job's. `reduction`: the reduce ops' (vocab.REDUCTIONS name); given only to them.




def _launch_broadcast(inp: torch.Tensor, out: torch.Tensor, group=None) -> None:
    root = BROADCAST_ROOT if group is None else dist.get_global_rank(group, BROADCAST_ROOT)  # src is a job rank
    dist.broadcast(out, src=root, group=group)



# ---- the kernels, by op name ---------------------------------------------------------------------


@dataclass(frozen=True)
class Kernel:
    name: str  # the op's name in wirecheck.vocab.ops
    fill: Callable[[torch.Tensor, int, int], None]
    expected: Callable[..., torch.Tensor]  # (start, stop, rank, n, count, device, reduction)
    launch: Callable[..., None]  # (input, output[, group=][, reduction=]) -> None


# Worker-side state: a self-test may swap an entry in its own worker process (selftests/faulty_workers.py).
KERNELS: dict[str, Kernel] = {}


def register(kernel: Kernel) -> Kernel:
    """Add `kernel` for its op; an op the vocabulary does not have, a second kernel of a name, or a
    reduction the vocabulary allows that this module cannot launch is an error at import."""
    op = vocab.get(kernel.name)
    if kernel.name in KERNELS:
        raise ValueError(f"collective {kernel.name!r} has two kernels; one per op")
    cannot = [r for r in op.reductions if r not in REDUCE_OPS]
    if cannot:
        raise ValueError(f"collective {kernel.name!r}: reductions {cannot} have no torch ReduceOp here; "
                         f"kernels launch {tuple(REDUCE_OPS)}")
    KERNELS[kernel.name] = kernel
    return kernel


# A row's DATA rule (wirecheck.vocab.ops.DATA) -> (fill, expected).
DATA_RULES = {"reduced": (_fill_own, _expect_all_reduce), "reduced_chunk": (_fill_own, _expect_reduce_scatter),
              "gathered": (_fill_own_chunk, _expect_all_gather), "transposed": (_fill_own, _expect_all_to_all)}
assert set(DATA_RULES) == set(vocab.DATA), "every DATA rule of the vocabulary has its fill and expected values here"


def _derived_launch(row: vocab.Op) -> Callable[..., None]:
    """fn(output[, input], [op=], group=) for the row's torch.distributed function, looked up when called
    (a test may swap torch's own function in a worker process)."""
    def launch(inp: torch.Tensor, out: torch.Tensor, group=None, reduction: str = "sum") -> None:
        kwargs: dict[str, Any] = {"group": group}
        if row.reductions:
            kwargs["op"] = REDUCE_OPS[reduction]
        getattr(dist, row.torch)(*((out,) if row.in_place else (out, inp)), **kwargs)

    return launch


def derived(row: vocab.Op) -> Kernel:
    """The kernel a row names (`torch=`, `data=`)."""
    fill, expected = DATA_RULES[row.data]
    return Kernel(row.name, fill, expected, _derived_launch(row))


# The special ones: broadcast sends from its root.
register(Kernel("broadcast", _fill_broadcast, _expect_broadcast, _launch_broadcast))
for _row in vocab.COLLECTIVES.values():
    if _row.torch is not None:
        register(derived(_row))

_WITHOUT = [op for op in vocab.OPS if op not in KERNELS]
if _WITHOUT:
    raise ImportError(f"collectives {_WITHOUT} of wirecheck.vocab.ops have no kernel in {__name__}")


def _reduction(op: str, reduction: str | None) -> str | None:
    """The reduction to run: the op's first where none is asked; one the op does not list is refused."""
    row = vocab.get(op)
    if reduction is None:
        return row.reduction
    if reduction not in row.reductions:
        raise ValueError(f"{op}: reduction {reduction!r}; {op} reduces with {row.reductions or 'nothing'}")
    return reduction


def _launcher(k: Kernel, inp: torch.Tensor, out: torch.Tensor, group, reduction: str | None) -> Callable[[], None]:
    kwargs: dict[str, Any] = {}
    if group is not None:
        kwargs["group"] = group
    if reduction is not None and reduction != "sum":
        kwargs["reduction"] = reduction  # sum is every launcher's default: a swapped test launcher takes (input, output)

    def launch() -> None:
        k.launch(inp, out, **kwargs)

    return launch


# ---- worker side ---------------------------------------------------------------------------------


def _is_cuda(ctx: RankContext) -> bool:
    return ctx.device.type == "cuda"


def _count_wrong(k: Kernel, out: torch.Tensor, rank: int, n: int, count: int,
                 reduction: str | None = None) -> tuple[int, int | None]:
    """Compare every output element with its expected value, on the device, a chunk at a time."""
    flat = out.view(-1)
    wrong, first_bad = 0, None
    for start in range(0, flat.numel(), CHUNK_ELEMENTS):
        stop = min(start + CHUNK_ELEMENTS, flat.numel())
        bad = flat[start:stop] != k.expected(start, stop, rank, n, count, flat.device, reduction)  # NaN != anything
        m = int(bad.sum())
        if m:
            wrong += m
            if first_bad is None:
                first_bad = start + int(bad.to(torch.int32).argmax())  # argmax: first maximum
    return wrong, first_bad


def _allocate(op: str, count: int, n: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    c = vocab.get(op)
    inp = torch.empty(c.input_elements(count, n), dtype=DTYPE, device=device)
    out = inp if c.in_place else torch.empty(c.output_elements(count, n), dtype=DTYPE, device=device)
    return inp, out


def _release(ctx: RankContext) -> None:
    # Give the previous size's buffers back before the next (possibly 1 GiB) allocation.
    if _is_cuda(ctx):
        torch.cuda.synchronize(ctx.device)
        torch.cuda.empty_cache()


def _check(ctx: RankContext, op: str, k: Kernel, inp: torch.Tensor, out: torch.Tensor, count: int,
           run: Callable[[], None], reduction: str | None) -> tuple[int, int | None]:
    """Fresh input, NaN output, one call through `run` (an eager launch or a graph replay), then every
    element compared."""
    n, rank = ctx.world_size, ctx.rank
    k.fill(inp, rank, n)  # in-place collectives overwrote it while timing
    if not vocab.get(op).in_place:
        out.fill_(math.nan)
    run()
    if _is_cuda(ctx):
        torch.cuda.synchronize(ctx.device)
    return _count_wrong(k, out, rank, n, count, reduction)


def _all_ranks_agree(ctx: RankContext, ok: bool, group=None) -> bool:
    """True when `ok` holds on every rank of `group` (a rank that could not capture must not leave the
    others replaying a graph it never joins)."""
    flag = torch.tensor([1 if ok else 0], dtype=torch.int32, device=ctx.device)
    dist.all_reduce(flag, op=dist.ReduceOp.MIN, group=group)
    return bool(flag.item())


def _measure_size(ctx: RankContext, op: str, size: int, warmup_iters: int, iters: int,
                  check: bool, graph: bool = False, graph_replays: int = 1, group=None,
                  reduction: str | None = None) -> dict[str, Any]:
    """`ctx` numbers the ranks of `group` (None: the whole job)."""
    k = KERNELS[op]  # looked up per call: a self-test may have swapped the entry in this process
    reduction = _reduction(op, reduction)
    n = ctx.world_size
    count = buffer_elements(op, size, n)
    inp, out = _allocate(op, count, n, ctx.device)
    launch = _launcher(k, inp, out, group, reduction)

    graph_time_s: float | None = None
    graph_note: str | None = None
    wrong_by_path: dict[str, int] = {}
    first_bad: int | None = None
    try:
        k.fill(inp, ctx.rank, n)
        for _ in range(warmup_iters):
            launch()  # also the communicator's warm-up before any capture
        eager_time_s = timing.time_eager(ctx, launch, iters, group)
        timed = check_graph = None
        if graph:
            try:
                timed = timing.capture(ctx, launch, iters)
                check_graph = timing.capture(ctx, launch, 1) if check else None
            except RuntimeError as exc:
                graph_note = f"capture failed on rank {ctx.rank}: {exc}".splitlines()[0]
            if not _all_ranks_agree(ctx, graph_note is None, group):
                graph_note = graph_note or CAPTURE_FAILED_ELSEWHERE
                timed = check_graph = None
        if timed is not None:
            graph_time_s = timing.time_replay(ctx, timed, iters, graph_replays, group)
            del timed
        if check:
            runs: list[tuple[str, Callable[[], None]]] = [(EAGER, launch)]
            if check_graph is not None:
                runs.append((GRAPH, lambda: timing.replay(ctx, check_graph)))
            for path, run in runs:
                wrong, first = _check(ctx, op, k, inp, out, count, run, reduction)
                wrong_by_path[path] = wrong
                if first_bad is None and first is not None:
                    first_bad = first
        check_graph = None
    finally:
        del inp, out
        _release(ctx)
    return {
        "bytes": count * ELEMENT_BYTES,
        "requested_bytes": size,
        "time_s": eager_time_s,
        "graph_time_s": graph_time_s,
        "graph_note": graph_note,
        "wrong": sum(wrong_by_path.values()) if check else None,
        "first_bad": first_bad,
        "wrong_by_path": wrong_by_path,
    }


def _provenance(ctx: RankContext) -> dict[str, Any]:
    nccl_version = None
    if ctx.backend == "nccl":
        v = torch.cuda.nccl.version()
        nccl_version = ".".join(map(str, v)) if isinstance(v, tuple) else str(v)
    return {
        "device_name": torch.cuda.get_device_name(ctx.device) if _is_cuda(ctx) else "cpu",
        "nccl_version": nccl_version,
        # The switches that change NCCL's path (NVLS, P2P, protocols) as this rank saw them.
        "nccl_env": {k: v for k, v in sorted(os.environ.items()) if k.startswith("NCCL_")},
    }


def measure(ctx: RankContext, op: str, sizes: list[int], warmup_iters: int, iters: int,
            check: bool = True, graph_up_to: int | None = None, graph_replays: int = 1,
            reduction: str | None = None) -> dict[str, Any]:
    """Worker function: time `op` at each size (mean per call on this rank) and check the result.

    Sizes up to `graph_up_to` are also timed as CUDA-graph replays ("graph_time_s"; None when not
    measured, "graph_note" says why where it was asked for), `graph_replays` replays of `iters`
    captured calls between the timing events. results[i]["time_s"] is the eager time,
    "wrong" the number of wrong elements in this rank's output over every checked path (None when
    check=False), "wrong_by_path" per path, "first_bad" the first wrong element's index.
    `reduction`: one of the op's reductions (wirecheck.vocab.ops); None, its first. Inside a pool's
    sub-group (wirecheck.workers.subgroups) `ctx` numbers the sub-group and `ctx.group` is its process group.
    """
    reduction = _reduction(op, reduction)
    if iters < 1:
        raise ValueError(f"{op}: iters must be >= 1, got {iters}")
    unavailable = None
    if graph_up_to is not None:
        nccl = _provenance(ctx)["nccl_version"]
        unavailable = timing.graph_unavailable(ctx, nccl)
    results = []
    for size in sizes:
        wanted = graph_up_to is not None and size <= graph_up_to
        res = _measure_size(ctx, op, size, warmup_iters, iters, check, graph=wanted and unavailable is None,
                            graph_replays=graph_replays, group=ctx.group, reduction=reduction)
        if wanted and unavailable is not None:
            res["graph_note"] = unavailable
        results.append(res)
    return {
        "rank": ctx.rank,
        "op": op,
        "dtype": vocab.DTYPE,
        "reduction": reduction,
        "world_size": ctx.world_size,
        "backend": ctx.backend,
        **_provenance(ctx),
        "warmup_iters": warmup_iters,
        "iters": iters,
        "graph_up_to": graph_up_to,
        "graph_replays": graph_replays,
        "results": results,
    }


def measure_group(ctx: RankContext, op: str, size: int, warmup_iters: int, iters: int, group,
                  group_ranks: list[int]) -> dict[str, Any]:
    """`op` at one size among `group_ranks` only, on their own process group `group` (this rank among
    them), so that disjoint groups run at the same time (the node pairs of wirecheck.fleet.pairs): eager
    calls timed, one call checked element by element, the data numbered by rank inside the group.
    Returns one size's result as `measure` has it in "results"."""
    view = replace(ctx, rank=group_ranks.index(ctx.rank), world_size=len(group_ranks))
    return _measure_size(view, op, size, warmup_iters, iters, check=True, group=group)


def measure_beside(ctx: RankContext, op: str, size: int, warmup_iters: int, iters: int, group,
                   group_ranks: list[int]) -> dict[str, Any]:
    """`op` at one size among `group_ranks` on their process group `group`, while this rank's device keeps
    computing on other streams (a burn-in's GEMM load, wirecheck.burnin.worker): timed and checked as
    `measure_group` does, but nothing here waits for the whole device (`measure_group` lines the ranks up
    with an idle device, which would drain the load first). The ranks line up with one small all_reduce
    of the group; events on the current stream time the calls; every element of one more call is checked.
    The buffers stay in the caching allocator for the next call. Returns one size's result as `measure`
    has it in "results"."""
    view = replace(ctx, rank=group_ranks.index(ctx.rank), world_size=len(group_ranks))
    k = KERNELS[op]
    reduction = _reduction(op, None)
    n = view.world_size
    count = buffer_elements(op, size, n)
    inp, out = _allocate(op, count, n, ctx.device)
    launch = _launcher(k, inp, out, group, reduction)
    k.fill(inp, view.rank, n)
    for _ in range(warmup_iters):
        launch()
    ready = torch.ones(1, dtype=torch.int32, device=ctx.device)
    dist.all_reduce(ready, group=group)
    ready.item()  # waits for the current stream only: the load's stream keeps running
    if _is_cuda(ctx):
        time_s = timing.time_events(launch, iters)  # its end event is on the current stream, not the device
    else:
        t0 = time.perf_counter()
        for _ in range(iters):
            launch()
        time_s = (time.perf_counter() - t0) / iters
    k.fill(inp, view.rank, n)
    if not vocab.get(op).in_place:
        out.fill_(math.nan)
    launch()
    wrong, first_bad = _count_wrong(k, out, view.rank, n, count, reduction)  # each chunk's count waits for the current stream
    return {"bytes": count * ELEMENT_BYTES, "requested_bytes": size, "time_s": time_s, "graph_time_s": None,
            "graph_note": None, "wrong": wrong, "first_bad": first_bad, "wrong_by_path": {EAGER: wrong}}


def measure_loop(ctx: RankContext, op: str, size: int, iters: int, warmup_iters: int = 1) -> dict[str, Any]:
    """Worker function for a pytest-benchmark round: `iters` back-to-back calls, no check."""
    r = _measure_size(ctx, op, size, warmup_iters, iters, check=False, group=ctx.group)
    return {"rank": ctx.rank, "op": op, "world_size": ctx.world_size, "iters": iters,
            "bytes": r["bytes"], "requested_bytes": size, "time_s": r["time_s"]}


