"""The collectives' worker side: each op's kernel (fill, expected values, launch), registered by op
name, and the worker functions that time and check them inside `launcher.WorkerGroup` ranks.

Only worker processes import this module, so it imports torch at the top. The ops' data (buffer
shape, busbw factor, dtypes and reductions, where the result lives, the nccl-tests binary) is
wirecheck.vocab.ops; the parent-side combiner is wirecheck.measure.collectives.

Data (`Values`, one per dtype, reduction and rank count): every element carries a value that depends
on the rank that produced it and on its index, integers small enough that every result is exact in
the dtype whatever order NCCL reduces in (nccl-tests' verifiable data does the same): a wrong, stale
(not written) or misplaced element therefore differs from the expected value, in bf16 and fp16 as in
fp32, for avg as for sum. A max or min shows a missing contribution only where that rank holds the
extreme: the rank's step in the pattern turns with the element, so each rank holds the extreme at
about 1/n of the elements from the first, and a max or min sees any rank's data go missing in any
buffer of n elements or more (a sweep's smallest sizes hold fewer: 8 B is 2 fp32 elements). Outputs start as NaN before the checked pass so an element the
collective never wrote cannot pass. Only the ranks where the op's result lives are checked (reduce:
the root; gloo leaves partial sums on the others).

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

import functools
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
from wirecheck.vocab.ops import buffer_elements

if TYPE_CHECKING:
    from wirecheck.workers.worker import RankContext

TORCH_DTYPES = {name: getattr(torch, d.torch) for name, d in vocab.DTYPES.items()}
# Element i of rank r holds table[(i + RANK_STRIDE*((r + i) mod n)) mod len(table)] (`value_table`): a
# prime table length, so that a shift by a chunk or a swap of two ranks' data changes the value.
PATTERN_MODULUS = 65521  # the longest table (a prime): fp32 sums of up to 256 ranks at its top stay below 2^24
RANK_STRIDE = 7919
# Elements generated/compared at a time: keeps the checker's temporaries small next to 1 GiB buffers.
CHUNK_ELEMENTS = 1 << 24
BROADCAST_ROOT = vocab.ROOT
REDUCE_OPS = {"sum": dist.ReduceOp.SUM, "max": dist.ReduceOp.MAX, "min": dist.ReduceOp.MIN, "avg": dist.ReduceOp.AVG}

# ---- data ----------------------------------------------------------------------------------------


def _largest_prime_upto(x: int) -> int:
    for p in range(x, 1, -1):
        if all(p % d for d in range(2, int(p ** 0.5) + 1)):
            return p
    return 0


def _exact_averages(candidates: torch.Tensor, n: int, dtype: torch.dtype) -> torch.Tensor:
    """The y of `candidates` whose contribution n*y averages back to exactly y however the backend
    averages: NCCL multiplies each contribution by 1/n rounded to the dtype (in the dtype or in float32,
    by GPU architecture), then sums; a backend may instead divide the sum. Where n is a power of two
    every y passes; else those whose rounded product lands on y (most of them)."""
    x = (candidates * n).to(dtype)
    scalar = torch.tensor(1.0 / n, dtype=dtype)
    ways = (x * scalar,  # in the dtype, by its rounded 1/n
            (x.float() * scalar.float()).to(dtype),  # in float32, by the dtype's rounded 1/n
            (x.float() * torch.tensor(1.0 / n, dtype=torch.float32)).to(dtype))  # in float32, by float32's
    exact = functools.reduce(torch.logical_and, [w.double() == candidates.double() for w in ways])
    return candidates[exact]


@functools.lru_cache(maxsize=64)
def value_table(dtype_name: str, n: int, reduction: str | None) -> torch.Tensor:
    """The integers y a rank's elements take (int64, CPU), for `n` ranks: every partial result of the
    reduction is an integer of at most the dtype's significand bits, so exact in any order. A sum of n
    values y <= 2^bits / n; max and min any y <= 2^bits; avg: each rank puts n*y and the average is
    the sum of the y, so the ranks' sum n * sum(y) <= 2^bits."""
    bits = vocab.dtype(dtype_name).bits
    top = {"sum": 2 ** bits // n, "avg": 2 ** bits // (n * n)}.get(reduction or "", 2 ** bits)
    candidates = torch.arange(1, min(top, PATTERN_MODULUS) + 1, dtype=torch.int64)
    if reduction == "avg" and n & (n - 1):
        candidates = _exact_averages(candidates, n, TORCH_DTYPES[dtype_name])
    size = _largest_prime_upto(len(candidates))
    if size < 2:
        raise ValueError(f"{dtype_name} {reduction or 'data'} over {n} ranks: no two values stay exact "
                         f"({vocab.dtype(dtype_name).bits} significand bits); measure it on fewer ranks or in fp32")
    return candidates[:size]


@dataclass(frozen=True)
class Values:
    """What each rank puts in and what the reduction over the ranks holds, for one dtype, reduction
    (None: the op reduces nothing) and rank count, at any global element index."""

    dtype: str
    n: int
    reduction: str | None = None

    @property
    def torch_dtype(self) -> torch.dtype:
        return TORCH_DTYPES[self.dtype]

    def _y(self, idx: torch.Tensor, rank: torch.Tensor | int) -> torch.Tensor:
        table = value_table(self.dtype, self.n, self.reduction).to(idx.device)
        # The rank's step turns with the element: at each element the ranks take the same n values in
        # another order, so every reduction is unchanged, and each rank holds the extreme at about 1/n
        # of the elements from the first one: a max or min misses no rank's data in n elements or more.
        turn = (rank + idx) % self.n
        return table[(idx + RANK_STRIDE * turn) % len(table)]

    def own(self, idx: torch.Tensor, rank: torch.Tensor | int) -> torch.Tensor:
        """Rank `rank`'s data at `idx` as it arrives elsewhere unreduced (gathered, transposed, broadcast)."""
        return self._y(idx, rank).to(self.torch_dtype)

    def put(self, idx: torch.Tensor, rank: int) -> torch.Tensor:
        """What rank `rank` puts at `idx` (avg: n times its value, so the average is exact)."""
        factor = self.n if self.reduction == "avg" else 1
        return (self._y(idx, rank) * factor).to(self.torch_dtype)

    def reduced(self, idx: torch.Tensor) -> torch.Tensor:
        """The reduction over ranks 0..n-1 at `idx`: a correct result."""
        ys = [self._y(idx, r) for r in range(self.n)]
        if self.reduction == "max":
            total = functools.reduce(torch.maximum, ys)
        elif self.reduction == "min":
            total = functools.reduce(torch.minimum, ys)
        else:  # sum; avg: the sum of the y (each rank put n*y)
            total = functools.reduce(torch.add, ys)
        return total.to(self.torch_dtype)


def _index(start: int, stop: int, device: torch.device) -> torch.Tensor:
    return torch.arange(start, stop, dtype=torch.int64, device=device)


def _fill_pattern(t: torch.Tensor, values: Values, rank: int, offset: int) -> None:
    """t[j] = what `rank` puts at global element offset + j, a chunk at a time."""
    for start in range(0, t.numel(), CHUNK_ELEMENTS):
        stop = min(start + CHUNK_ELEMENTS, t.numel())
        t[start:stop].copy_(values.put(_index(offset + start, offset + stop, t.device), rank))


# Fillers: (input buffer, rank, values). Expected: (start, stop, rank, count, device, values) -> the
# values output[start:stop] must hold on `rank`, where count is the size in elements.

def _fill_own(t: torch.Tensor, rank: int, values: Values) -> None:
    _fill_pattern(t, values, rank, 0)


def _fill_own_chunk(t: torch.Tensor, rank: int, values: Values) -> None:
    # all_gather input: this rank's chunk, numbered by its place in the gathered output.
    _fill_pattern(t, values, rank, rank * t.numel())


def _fill_broadcast(t: torch.Tensor, rank: int, values: Values) -> None:
    if rank == BROADCAST_ROOT:
        _fill_pattern(t, values, rank, 0)
    else:
        t.fill_(math.nan)  # a receiver that never received keeps NaN, which never compares equal


def _expect_reduced(start: int, stop: int, rank: int, count: int, device: torch.device,
                    values: Values) -> torch.Tensor:
    return values.reduced(_index(start, stop, device))


def _expect_gathered(start: int, stop: int, rank: int, count: int, device: torch.device,
                     values: Values) -> torch.Tensor:
    idx = _index(start, stop, device)
    return values.own(idx, idx // (count // values.n))


def _expect_reduced_chunk(start: int, stop: int, rank: int, count: int, device: torch.device,
                          values: Values) -> torch.Tensor:
    offset = rank * (count // values.n)
    return values.reduced(_index(offset + start, offset + stop, device))


def _expect_broadcast(start: int, stop: int, rank: int, count: int, device: torch.device,
                      values: Values) -> torch.Tensor:
    return values.own(_index(start, stop, device), BROADCAST_ROOT)


def _expect_transposed(start: int, stop: int, rank: int, count: int, device: torch.device,
                       values: Values) -> torch.Tensor:
    # Output chunk s on rank r is chunk r of rank s's input.
    chunk = count // values.n
    idx = _index(start, stop, device)
    return values.own(rank * chunk + idx % chunk, idx // chunk)


# Launchers read `dist.<op>` when called, so a test can swap an entry's launcher (or torch's own
# function) in a worker process. `group`: a process group of some of the job's ranks (measure_group);
# None, the whole job's. `reduction`: the reduce ops' (vocab.REDUCTIONS name); given only to them.


def _root(group) -> int:
    """The root's rank in the job: torch's src and dst are job ranks."""
    return vocab.ROOT if group is None else dist.get_global_rank(group, vocab.ROOT)


def _launch_broadcast(inp: torch.Tensor, out: torch.Tensor, group=None) -> None:
    dist.broadcast(out, src=_root(group), group=group)


# ---- the kernels, by op name ---------------------------------------------------------------------


@dataclass(frozen=True)
class Kernel:
    name: str  # the op's name in wirecheck.vocab.ops
    fill: Callable[[torch.Tensor, int, Values], None]
    expected: Callable[..., torch.Tensor]  # (start, stop, rank, count, device, values)
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
DATA_RULES = {"reduced": (_fill_own, _expect_reduced), "reduced_chunk": (_fill_own, _expect_reduced_chunk),
              "gathered": (_fill_own_chunk, _expect_gathered), "transposed": (_fill_own, _expect_transposed)}
assert set(DATA_RULES) == set(vocab.DATA), "every DATA rule of the vocabulary has its fill and expected values here"


def _derived_launch(row: vocab.Op) -> Callable[..., None]:
    """fn(output[, input], [op=], [dst=], group=) for the row's torch.distributed function, looked up when
    called (a test may swap torch's own function in a worker process); dst, the root, where the result
    lives on the root alone."""
    def launch(inp: torch.Tensor, out: torch.Tensor, group=None, reduction: str = "sum") -> None:
        kwargs: dict[str, Any] = {"group": group}
        if row.reductions:
            kwargs["op"] = REDUCE_OPS[reduction]
        if row.result == vocab.ROOT_ONLY:
            kwargs["dst"] = _root(group)
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


def _values(op: str, n: int, dtype: str | None, reduction: str | None) -> Values:
    """The data of `op` at `dtype` and `reduction` (None: the op's first; one the op does not list is
    refused, wirecheck.vocab.ops.axes)."""
    a = vocab.axes(op, dtype, reduction)
    return Values(a.dtype, n, a.reduction)


def _holds_result(op: str, rank: int, n: int) -> bool:
    return rank in vocab.get(op).result_ranks(n)


def _count_wrong(k: Kernel, out: torch.Tensor, rank: int, count: int, values: Values) -> tuple[int, int | None]:
    """Compare every output element with its expected value, on the device, a chunk at a time."""
    flat = out.view(-1)
    wrong, first_bad = 0, None
    for start in range(0, flat.numel(), CHUNK_ELEMENTS):
        stop = min(start + CHUNK_ELEMENTS, flat.numel())
        bad = flat[start:stop] != k.expected(start, stop, rank, count, flat.device, values)  # NaN != anything
        m = int(bad.sum())
        if m:
            wrong += m
            if first_bad is None:
                first_bad = start + int(bad.to(torch.int32).argmax())  # argmax: first maximum
    return wrong, first_bad


def _allocate(op: str, count: int, values: Values, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    c, n, dtype = vocab.get(op), values.n, values.torch_dtype
    inp = torch.empty(c.input_elements(count, n), dtype=dtype, device=device)
    out = inp if c.in_place else torch.empty(c.output_elements(count, n), dtype=dtype, device=device)
    return inp, out


def _release(ctx: RankContext) -> None:
    # Give the previous size's buffers back before the next (possibly 1 GiB) allocation.
    if _is_cuda(ctx):
        torch.cuda.synchronize(ctx.device)
        torch.cuda.empty_cache()


def _check(ctx: RankContext, op: str, k: Kernel, inp: torch.Tensor, out: torch.Tensor, count: int,
           run: Callable[[], None], values: Values) -> tuple[int | None, int | None]:
    """Fresh input, NaN output, one call through `run` (an eager launch or a graph replay), then every
    element compared; (None, None) on a rank where the op's result does not live (it takes part in the
    call, and what its buffer holds after it is no one's result)."""
    rank = ctx.rank
    k.fill(inp, rank, values)  # in-place collectives overwrote it while timing
    if not vocab.get(op).in_place:
        out.fill_(math.nan)
    run()
    if _is_cuda(ctx):
        torch.cuda.synchronize(ctx.device)
    if not _holds_result(op, rank, values.n):
        return None, None
    return _count_wrong(k, out, rank, count, values)


def _all_ranks_agree(ctx: RankContext, ok: bool, group=None) -> bool:
    """True when `ok` holds on every rank of `group` (a rank that could not capture must not leave the
    others replaying a graph it never joins)."""
    flag = torch.tensor([1 if ok else 0], dtype=torch.int32, device=ctx.device)
    dist.all_reduce(flag, op=dist.ReduceOp.MIN, group=group)
    return bool(flag.item())


def refused(ctx: RankContext, op: str, values: Values, group=None) -> str | None:
    """Why the backend refuses `op` at this dtype and reduction (gloo: "Cannot use ReduceOp.AVG with
    Gloo" in some torch versions), from one call on the smallest buffer; None where it runs it. Every
    rank runs the same software, so every rank refuses alike and none is left waiting."""
    if values.reduction is None or values.reduction == "sum":
        return None
    k = KERNELS[op]
    count = buffer_elements(op, vocab.min_size(op, values.n, values.dtype), values.n, values.dtype)
    inp, out = _allocate(op, count, values, ctx.device)
    k.fill(inp, ctx.rank, values)
    try:
        _launcher(k, inp, out, group, values.reduction)()
    except (RuntimeError, ValueError) as exc:
        return f"{ctx.backend} refuses {op} {values.dtype} {values.reduction}: {str(exc).splitlines()[0]}"
    if _is_cuda(ctx):
        torch.cuda.synchronize(ctx.device)
    return None


def _measure_size(ctx: RankContext, op: str, size: int, warmup_iters: int, iters: int,
                  check: bool, graph: bool = False, graph_replays: int = 1, group=None,
                  values: Values | None = None) -> dict[str, Any]:
    """`ctx` numbers the ranks of `group` (None: the whole job)."""
    k = KERNELS[op]  # looked up per call: a self-test may have swapped the entry in this process
    n = ctx.world_size
    values = values or _values(op, n, None, None)
    count = buffer_elements(op, size, n, values.dtype)
    inp, out = _allocate(op, count, values, ctx.device)
    launch = _launcher(k, inp, out, group, values.reduction)

    graph_time_s: float | None = None
    graph_note: str | None = None
    wrong_by_path: dict[str, int] = {}
    first_bad: int | None = None
    holds = _holds_result(op, ctx.rank, n)
    try:
        k.fill(inp, ctx.rank, values)
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
                wrong, first = _check(ctx, op, k, inp, out, count, run, values)
                if holds:
                    wrong_by_path[path] = wrong
                if first_bad is None and first is not None:
                    first_bad = first
        check_graph = None
    finally:
        del inp, out
        _release(ctx)
    return {
        "bytes": count * vocab.dtype(values.dtype).bytes,
        "requested_bytes": size,
        "time_s": eager_time_s,
        "graph_time_s": graph_time_s,
        "graph_note": graph_note,
        # None: not checked, or (holds_result false) no result lives on this rank
        "wrong": sum(wrong_by_path.values()) if check and holds else None,
        "holds_result": holds,
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
            reduction: str | None = None, dtype: str | None = None) -> dict[str, Any]:
    """Worker function: time `op` at each size (mean per call on this rank) and check the result.

    Sizes up to `graph_up_to` are also timed as CUDA-graph replays ("graph_time_s"; None when not
    measured, "graph_note" says why where it was asked for), `graph_replays` replays of `iters`
    captured calls between the timing events. results[i]["time_s"] is the eager time,
    "wrong" the number of wrong elements in this rank's output over every checked path (None when
    check=False, or on a rank where the op's result does not live), "wrong_by_path" per path,
    "first_bad" the first wrong element's index. `dtype`, `reduction`: one of the op's
    (wirecheck.vocab.ops); None, its first. Where the backend refuses the reduction, "refused" says
    why and nothing is measured. Inside a pool's sub-group (wirecheck.workers.subgroups) `ctx`
    numbers the sub-group and `ctx.group` is its process group.
    """
    values = _values(op, ctx.world_size, dtype, reduction)
    if iters < 1:
        raise ValueError(f"{op}: iters must be >= 1, got {iters}")
    header = {"rank": ctx.rank, "op": op, "dtype": values.dtype, "reduction": values.reduction,
              "world_size": ctx.world_size, "backend": ctx.backend, **_provenance(ctx)}
    why = refused(ctx, op, values, ctx.group)
    if why is not None:
        return {**header, "refused": why, "results": []}
    unavailable = None
    if graph_up_to is not None:
        unavailable = timing.graph_unavailable(ctx, header["nccl_version"])
    results = []
    for size in sizes:
        wanted = graph_up_to is not None and size <= graph_up_to
        res = _measure_size(ctx, op, size, warmup_iters, iters, check, graph=wanted and unavailable is None,
                            graph_replays=graph_replays, group=ctx.group, values=values)
        if wanted and unavailable is not None:
            res["graph_note"] = unavailable
        results.append(res)
    return {
        **header,
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
    n = view.world_size
    values = _values(op, n, None, None)
    count = buffer_elements(op, size, n, values.dtype)
    inp, out = _allocate(op, count, values, ctx.device)
    launch = _launcher(k, inp, out, group, values.reduction)
    k.fill(inp, view.rank, values)
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
    k.fill(inp, view.rank, values)
    if not vocab.get(op).in_place:
        out.fill_(math.nan)
    launch()
    holds = _holds_result(op, view.rank, n)
    # each chunk's count waits for the current stream
    wrong, first_bad = _count_wrong(k, out, view.rank, count, values) if holds else (None, None)
    return {"bytes": count * vocab.dtype(values.dtype).bytes, "requested_bytes": size, "time_s": time_s,
            "graph_time_s": None, "graph_note": None, "wrong": wrong, "holds_result": holds, "first_bad": first_bad,
            "wrong_by_path": {EAGER: wrong} if holds else {}}


def measure_loop(ctx: RankContext, op: str, size: int, iters: int, warmup_iters: int = 1) -> dict[str, Any]:
    """Worker function for a pytest-benchmark round: `iters` back-to-back calls, no check."""
    r = _measure_size(ctx, op, size, warmup_iters, iters, check=False, group=ctx.group)
    return {"rank": ctx.rank, "op": op, "world_size": ctx.world_size, "iters": iters,
            "bytes": r["bytes"], "requested_bytes": size, "time_s": r["time_s"]}
