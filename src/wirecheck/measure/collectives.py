"""One table of collectives in the nccl-tests style, the worker functions that measure them, and the
parent-side combiner.

Conventions (nccl-tests' PERFORMANCE.md): `size` is the total buffer in bytes — the all_gather
output, the reduce_scatter input, each rank's all_to_all send buffer; algbw = bytes / time of the
slowest rank; busbw = algbw x a per-collective factor that makes it comparable with the link speed.

Data: float32 everywhere (bf16 adds nothing to a wire check). Every element carries a value that
depends on the rank that produced it and on its index, small integers so every sum is exact in
float32 whatever order NCCL adds in. A wrong, stale (not written) or misplaced element therefore
differs from the expected value; outputs start as NaN before the checked pass so an element the
collective never wrote cannot pass.

Timing: on GPUs, sizes up to `graph_up_to` are timed twice, as eager calls and as the same calls
replayed from a CUDA graph (see wirecheck.measure.collective_timing); the parent keeps the faster path per size
and records both. Each timed path is checked element by element. gloo/CPU has eager calls only.

Worker functions (`measure`, `measure_loop`) run inside `launcher.WorkerGroup` ranks; `combine`,
`busbw_factor`, `feasible_sizes` and `format_table` run in the parent and touch no device.

torch is imported inside the functions that touch a tensor, never at module level: the table
(`COLLECTIVES`, `OPS`) is read by the thresholds loader, `wirecheck judge`, `report` and `fleet
report`, which run where there is no torch. A new collective is one row of the table, with its
fill, expected-value and launch functions beside the others here.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING, Any, Callable

from wirecheck.measure.curve import EAGER, GRAPH, choose_path

if TYPE_CHECKING:
    import torch

    from wirecheck.workers.worker import RankContext

ELEMENT_BYTES = 4  # float32
# Element i of rank r holds ((i + RANK_STRIDE*r) mod PATTERN_MODULUS) + 1. Both primes: a shift by a
# chunk or a swap of two ranks' data changes the value. Values < 2^16, so a sum over up to
# MAX_RANKS ranks stays below 2^24 and is exact in float32.
PATTERN_MODULUS = 65521
RANK_STRIDE = 7919
MAX_RANKS = 256
# Elements generated/compared at a time: keeps the checker's temporaries small next to 1 GiB buffers.
CHUNK_ELEMENTS = 1 << 24
BROADCAST_ROOT = 0
CAPTURE_FAILED_ELSEWHERE = "capture failed on another rank"

# ---- data ----------------------------------------------------------------------------------------


def _dtype() -> torch.dtype:
    import torch

    return torch.float32


def __getattr__(name: str):
    # DTYPE (torch.float32) for the worker-side callers, resolved on first use: importing the
    # module must not import torch.
    if name == "DTYPE":
        return _dtype()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _values(global_index: torch.Tensor, src_rank: torch.Tensor | int) -> torch.Tensor:
    return ((global_index + RANK_STRIDE * src_rank) % PATTERN_MODULUS + 1).to(_dtype())


def _index(start: int, stop: int, device: torch.device) -> torch.Tensor:
    import torch

    return torch.arange(start, stop, dtype=torch.int64, device=device)


def pattern(rank: int, start: int, stop: int, device: torch.device) -> torch.Tensor:
    """What rank `rank` puts at global elements [start, stop)."""
    return _values(_index(start, stop, device), rank)


def pattern_sum(n: int, start: int, stop: int, device: torch.device) -> torch.Tensor:
    """The sum over ranks 0..n-1 of their pattern at elements [start, stop): a correct reduction."""
    import torch

    idx = _index(start, stop, device)
    total = torch.zeros_like(idx)
    for r in range(n):
        total += (idx + RANK_STRIDE * r) % PATTERN_MODULUS + 1
    return total.to(_dtype())


def _fill_pattern(t: torch.Tensor, rank: int, offset: int) -> None:
    """t[j] = pattern of `rank` at global element offset + j, a chunk at a time."""
    for start in range(0, t.numel(), CHUNK_ELEMENTS):
        stop = min(start + CHUNK_ELEMENTS, t.numel())
        t[start:stop].copy_(pattern(rank, offset + start, offset + stop, t.device))


# Fillers: (input buffer, rank, world size). Expected: (start, stop, rank, n, count, device) ->
# the values output[start:stop] must hold on `rank`, where count is the size in elements.

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


def _expect_all_reduce(start: int, stop: int, rank: int, n: int, count: int, device: torch.device) -> torch.Tensor:
    return pattern_sum(n, start, stop, device)


def _expect_all_gather(start: int, stop: int, rank: int, n: int, count: int, device: torch.device) -> torch.Tensor:
    idx = _index(start, stop, device)
    return _values(idx, idx // (count // n))


def _expect_reduce_scatter(start: int, stop: int, rank: int, n: int, count: int, device: torch.device) -> torch.Tensor:
    offset = rank * (count // n)
    return pattern_sum(n, offset + start, offset + stop, device)


def _expect_broadcast(start: int, stop: int, rank: int, n: int, count: int, device: torch.device) -> torch.Tensor:
    return pattern(BROADCAST_ROOT, start, stop, device)


def _expect_all_to_all(start: int, stop: int, rank: int, n: int, count: int, device: torch.device) -> torch.Tensor:
    # Output chunk s on rank r is chunk r of rank s's input.
    chunk = count // n
    idx = _index(start, stop, device)
    return _values(rank * chunk + idx % chunk, idx // chunk)


# Launchers read `dist.<op>` when called, so a test can swap an entry's launcher (or torch's own
# function) in a worker process. `group`: a process group of some of the job's ranks (measure_group);
# None, the whole job's.

def _launch_all_reduce(inp: torch.Tensor, out: torch.Tensor, group=None) -> None:
    import torch.distributed as dist

    dist.all_reduce(out, group=group)


def _launch_all_gather(inp: torch.Tensor, out: torch.Tensor, group=None) -> None:
    import torch.distributed as dist

    dist.all_gather_into_tensor(out, inp, group=group)


def _launch_reduce_scatter(inp: torch.Tensor, out: torch.Tensor, group=None) -> None:
    import torch.distributed as dist

    dist.reduce_scatter_tensor(out, inp, group=group)


def _launch_broadcast(inp: torch.Tensor, out: torch.Tensor, group=None) -> None:
    import torch.distributed as dist

    root = BROADCAST_ROOT if group is None else dist.get_global_rank(group, BROADCAST_ROOT)  # src is a job rank
    dist.broadcast(out, src=root, group=group)


def _launch_all_to_all(inp: torch.Tensor, out: torch.Tensor, group=None) -> None:
    import torch.distributed as dist

    dist.all_to_all_single(out, inp, group=group)


# ---- the table -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Collective:
    name: str
    torch_function: str
    # Buffers are world_size equal chunks: the element count is rounded down to a multiple of n.
    chunked: bool
    # One buffer is input and output (torch's all_reduce and broadcast work in place).
    in_place: bool
    bus_factor: Callable[[int], float]
    input_elements: Callable[[int, int], int]  # (count, n) -> elements
    output_elements: Callable[[int, int], int]
    fill: Callable[[torch.Tensor, int, int], None]
    expected: Callable[[int, int, int, int, int, torch.device], torch.Tensor]
    launch: Callable[..., None]  # (input, output[, group=]) -> None


def _whole(count: int, n: int) -> int:
    return count


def _chunk(count: int, n: int) -> int:
    return count // n


COLLECTIVES: dict[str, Collective] = {
    c.name: c
    for c in (
        Collective("all_reduce", "all_reduce", False, True, lambda n: 2 * (n - 1) / n,
                   _whole, _whole, _fill_own, _expect_all_reduce, _launch_all_reduce),
        Collective("all_gather", "all_gather_into_tensor", True, False, lambda n: (n - 1) / n,
                   _chunk, _whole, _fill_own_chunk, _expect_all_gather, _launch_all_gather),
        Collective("reduce_scatter", "reduce_scatter_tensor", True, False, lambda n: (n - 1) / n,
                   _whole, _chunk, _fill_own, _expect_reduce_scatter, _launch_reduce_scatter),
        Collective("broadcast", "broadcast", False, True, lambda n: 1.0,
                   _whole, _whole, _fill_broadcast, _expect_broadcast, _launch_broadcast),
        Collective("all_to_all", "all_to_all_single", True, False, lambda n: (n - 1) / n,
                   _whole, _whole, _fill_own, _expect_all_to_all, _launch_all_to_all),
    )
}


# The collectives the suite runs, in order: tests, thresholds and reports take the names from here.
OPS = tuple(COLLECTIVES)


def get(op: str) -> Collective:
    try:
        return COLLECTIVES[op]
    except KeyError:
        raise ValueError(f"unknown collective {op!r}; known: {', '.join(COLLECTIVES)}") from None


def busbw_factor(op: str, n: int) -> float:
    """busbw / algbw for `op` on n ranks (nccl-tests' PERFORMANCE.md)."""
    return get(op).bus_factor(n)


def min_size(op: str, n: int) -> int:
    """The smallest size in bytes that gives every rank at least one element of `op`'s buffers."""
    return ELEMENT_BYTES * (n if get(op).chunked else 1)


def feasible_sizes(op: str, sizes, n: int) -> list[int]:
    """The sizes of a sweep that `op` can run on n ranks (nccl-tests prints 0-byte rows for the others;
    we leave them out)."""
    return [s for s in sizes if s >= min_size(op, n)]


def buffer_elements(op: str, size: int, n: int) -> int:
    """Elements of the size-defining buffer for `size` bytes on n ranks (rounded down as nccl-tests does)."""
    c = get(op)
    if not 1 <= n <= MAX_RANKS:
        raise ValueError(f"{op}: {n} ranks; sums stay exact in float32 only up to {MAX_RANKS}")
    count = size // ELEMENT_BYTES
    if c.chunked:
        count -= count % n
    if count < (n if c.chunked else 1):
        need = ELEMENT_BYTES * (n if c.chunked else 1)
        raise ValueError(f"{op}: size {size} B is too small for {n} ranks; need at least {need} B")
    return count


# ---- worker side ---------------------------------------------------------------------------------


def _is_cuda(ctx: RankContext) -> bool:
    return ctx.device.type == "cuda"


def _count_wrong(c: Collective, out: torch.Tensor, rank: int, n: int, count: int) -> tuple[int, int | None]:
    """Compare every output element with its expected value, on the device, a chunk at a time."""
    import torch

    flat = out.view(-1)
    wrong, first_bad = 0, None
    for start in range(0, flat.numel(), CHUNK_ELEMENTS):
        stop = min(start + CHUNK_ELEMENTS, flat.numel())
        bad = flat[start:stop] != c.expected(start, stop, rank, n, count, flat.device)  # NaN != anything
        k = int(bad.sum())
        if k:
            wrong += k
            if first_bad is None:
                first_bad = start + int(bad.to(torch.int32).argmax())  # argmax: first maximum
    return wrong, first_bad


def _allocate(c: Collective, count: int, n: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    import torch

    inp = torch.empty(c.input_elements(count, n), dtype=_dtype(), device=device)
    out = inp if c.in_place else torch.empty(c.output_elements(count, n), dtype=_dtype(), device=device)
    return inp, out


def _release(ctx: RankContext) -> None:
    # Give the previous size's buffers back before the next (possibly 1 GiB) allocation.
    if _is_cuda(ctx):
        import torch

        torch.cuda.synchronize(ctx.device)
        torch.cuda.empty_cache()


def _check(ctx: RankContext, c: Collective, inp: torch.Tensor, out: torch.Tensor, count: int,
           run: Callable[[], None]) -> tuple[int, int | None]:
    """Fresh input, NaN output, one call through `run` (an eager launch or a graph replay), then every
    element compared."""
    n, rank = ctx.world_size, ctx.rank
    c.fill(inp, rank, n)  # in-place collectives overwrote it while timing
    if not c.in_place:
        out.fill_(math.nan)
    run()
    if _is_cuda(ctx):
        import torch

        torch.cuda.synchronize(ctx.device)
    return _count_wrong(c, out, rank, n, count)


def _all_ranks_agree(ctx: RankContext, ok: bool) -> bool:
    """True when `ok` holds on every rank (a rank that could not capture must not leave the others
    replaying a graph it never joins)."""
    import torch
    import torch.distributed as dist

    flag = torch.tensor([1 if ok else 0], dtype=torch.int32, device=ctx.device)
    dist.all_reduce(flag, op=dist.ReduceOp.MIN)
    return bool(flag.item())


def _measure_size(ctx: RankContext, op: str, size: int, warmup_iters: int, iters: int,
                  check: bool, graph: bool = False, graph_replays: int = 1, group=None) -> dict[str, Any]:
    """`ctx` numbers the ranks of `group` (None: the whole job); no graphs on a group."""
    from wirecheck.measure import collective_timing as timing

    c = COLLECTIVES[op]  # looked up per call: a self-test may have swapped the entry in this process
    n = ctx.world_size
    count = buffer_elements(op, size, n)
    inp, out = _allocate(c, count, n, ctx.device)

    def launch() -> None:
        if group is None:
            c.launch(inp, out)  # the whole job's ranks: a swapped test launcher takes (input, output)
        else:
            c.launch(inp, out, group=group)

    graph_time_s: float | None = None
    graph_note: str | None = None
    wrong_by_path: dict[str, int] = {}
    first_bad: int | None = None
    try:
        c.fill(inp, ctx.rank, n)
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
            if not _all_ranks_agree(ctx, graph_note is None):
                graph_note = graph_note or CAPTURE_FAILED_ELSEWHERE
                timed = check_graph = None
        if timed is not None:
            graph_time_s = timing.time_replay(ctx, timed, iters, graph_replays)
            del timed
        if check:
            runs: list[tuple[str, Callable[[], None]]] = [(EAGER, launch)]
            if check_graph is not None:
                runs.append((GRAPH, lambda: timing.replay(ctx, check_graph)))
            for path, run in runs:
                wrong, first = _check(ctx, c, inp, out, count, run)
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
    import torch

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


# The worker entry names, spelled here once: the plugin, `wirecheck nccl-tests` and the multi-node job
# import them (a worker resolves "module:function" itself).
MEASURE_WORKER = "wirecheck.measure.collectives:measure"
MEASURE_LOOP_WORKER = "wirecheck.measure.collectives:measure_loop"


def measure(ctx: RankContext, op: str, sizes: list[int], warmup_iters: int, iters: int,
            check: bool = True, graph_up_to: int | None = None, graph_replays: int = 1) -> dict[str, Any]:
    """Worker function: time `op` at each size (mean per call on this rank) and check the result.

    Sizes up to `graph_up_to` are also timed as CUDA-graph replays ("graph_time_s"; None when not
    measured, "graph_note" says why where it was asked for), `graph_replays` replays of `iters`
    captured calls between the timing events. results[i]["time_s"] is the eager time,
    "wrong" the number of wrong elements in this rank's output over every checked path (None when
    check=False), "wrong_by_path" per path, "first_bad" the first wrong element's index.
    """
    get(op)
    if iters < 1:
        raise ValueError(f"{op}: iters must be >= 1, got {iters}")
    from wirecheck.measure import collective_timing as timing

    unavailable = None
    if graph_up_to is not None:
        nccl = _provenance(ctx)["nccl_version"]
        unavailable = timing.graph_unavailable(ctx, nccl)
    results = []
    for size in sizes:
        wanted = graph_up_to is not None and size <= graph_up_to
        res = _measure_size(ctx, op, size, warmup_iters, iters, check, graph=wanted and unavailable is None,
                            graph_replays=graph_replays)
        if wanted and unavailable is not None:
            res["graph_note"] = unavailable
        results.append(res)
    return {
        "rank": ctx.rank,
        "op": op,
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
    import torch
    import torch.distributed as dist

    view = replace(ctx, rank=group_ranks.index(ctx.rank), world_size=len(group_ranks))
    c = COLLECTIVES[op]
    n = view.world_size
    count = buffer_elements(op, size, n)
    inp, out = _allocate(c, count, n, ctx.device)

    def launch() -> None:
        c.launch(inp, out, group=group)

    c.fill(inp, view.rank, n)
    for _ in range(warmup_iters):
        launch()
    ready = torch.ones(1, dtype=torch.int32, device=ctx.device)
    dist.all_reduce(ready, group=group)
    ready.item()  # waits for the current stream only: the load's stream keeps running
    if _is_cuda(ctx):
        from wirecheck.measure.collective_timing import time_events

        time_s = time_events(launch, iters)  # its end event is on the current stream, not the device
    else:
        t0 = time.perf_counter()
        for _ in range(iters):
            launch()
        time_s = (time.perf_counter() - t0) / iters
    c.fill(inp, view.rank, n)
    if not c.in_place:
        out.fill_(math.nan)
    launch()
    wrong, first_bad = _count_wrong(c, out, view.rank, n, count)  # each chunk's count waits for the current stream
    return {"bytes": count * ELEMENT_BYTES, "requested_bytes": size, "time_s": time_s, "graph_time_s": None,
            "graph_note": None, "wrong": wrong, "first_bad": first_bad, "wrong_by_path": {EAGER: wrong}}


def measure_loop(ctx: RankContext, op: str, size: int, iters: int, warmup_iters: int = 1) -> dict[str, Any]:
    """Worker function for a pytest-benchmark round: `iters` back-to-back calls, no check."""
    r = _measure_size(ctx, op, size, warmup_iters, iters, check=False)
    return {"rank": ctx.rank, "op": op, "world_size": ctx.world_size, "iters": iters,
            "bytes": r["bytes"], "requested_bytes": size, "time_s": r["time_s"]}


# ---- parent side ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class SizeResult:
    """One size of one collective over all ranks. The slowest rank's time counts; where both paths
    were timed, the faster path's (`path`) counts and both stay in the record."""

    op: str
    world_size: int
    bytes: int
    requested_bytes: int
    time_s: float  # per call, the path that counts
    algbw: float  # bytes/s
    busbw: float  # bytes/s
    rank_time_spread: float  # slowest / fastest rank, on the path that counts
    wrong_by_rank: dict[int, int | None]  # None: not checked; else wrong elements over every checked path
    first_bad_by_rank: dict[int, int]  # only ranks with wrong elements
    path: str = EAGER  # "eager" or "graph"
    eager_time_s: float | None = None  # slowest rank's eager time per call
    graph_time_s: float | None = None  # slowest rank's graph-replay time per call; None: not timed
    graph_note: str | None = None  # why the graph path was not timed where it was asked for
    bad_paths: tuple[str, ...] = ()  # paths whose output had wrong elements on some rank

    @property
    def checked(self) -> bool:
        return all(w is not None for w in self.wrong_by_rank.values())

    @property
    def wrong(self) -> int | None:
        return sum(self.wrong_by_rank.values()) if self.checked else None  # type: ignore[arg-type]

    @property
    def ok(self) -> bool:
        """Checked and every element right."""
        return self.wrong == 0

    def wrong_summary(self) -> str | None:
        """'all_reduce at 4096 B: rank 1 has 1 wrong element(s) (first at element 5)', or None."""
        bad = [(r, w) for r, w in sorted(self.wrong_by_rank.items()) if w]
        if not bad:
            return None
        ranks = "; ".join(f"rank {r} has {w} wrong element(s) (first at element {self.first_bad_by_rank[r]})"
                          for r, w in bad)
        paths = f" ({' and '.join(self.bad_paths)} path)" if self.graph_time_s is not None and self.bad_paths else ""
        return f"{self.op} at {self.bytes} B on {self.world_size} ranks: {ranks}{paths}"

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _slowest(times: list[float]) -> tuple[float, float]:
    """(slowest, slowest / fastest)."""
    slowest, fastest = max(times), min(times)
    return slowest, (slowest / fastest if fastest > 0 else math.inf)


def _size_result(op: str, n: int, nbytes: int, requested: int, times: list[float],
                 wrong: dict[int, int | None], first_bad: dict[int, int],
                 graph_times: list[float | None] | None = None, graph_note: str | None = None,
                 bad_paths: tuple[str, ...] = ()) -> SizeResult:
    eager, eager_spread = _slowest(times)
    graph = None
    graph_spread = math.inf
    if graph_times and all(t is not None for t in graph_times):
        graph, graph_spread = _slowest([t for t in graph_times if t is not None])
    path, time_s = choose_path(eager, graph)
    algbw = nbytes / time_s if time_s > 0 else math.inf
    return SizeResult(
        op=op, world_size=n, bytes=nbytes, requested_bytes=requested, time_s=time_s,
        algbw=algbw, busbw=algbw * busbw_factor(op, n),
        rank_time_spread=graph_spread if path == GRAPH else eager_spread,
        wrong_by_rank=wrong, first_bad_by_rank=first_bad,
        path=path, eager_time_s=eager, graph_time_s=graph, graph_note=graph_note, bad_paths=bad_paths,
    )


def _by_rank(op: str, world_size: int, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    ranks = sorted(r["rank"] for r in records)
    if ranks != list(range(world_size)):
        raise ValueError(f"{op}: expected one record per rank 0..{world_size - 1}, got ranks {ranks}")
    for r in records:
        if r["op"] != op or r["world_size"] != world_size:
            raise ValueError(f"{op} on {world_size} ranks: rank {r['rank']} measured "
                             f"{r['op']} on {r['world_size']} ranks")
    return sorted(records, key=lambda r: r["rank"])


def combine(op: str, world_size: int, rank_records: list[dict[str, Any]]) -> list[SizeResult]:
    """Per-rank `measure` records -> one SizeResult per size (the faster path where both were timed)."""
    records = _by_rank(op, world_size, rank_records)
    sizes = [res["bytes"] for res in records[0]["results"]]
    for rec in records:
        if [res["bytes"] for res in rec["results"]] != sizes:
            raise ValueError(f"{op}: rank {rec['rank']} measured sizes "
                             f"{[res['bytes'] for res in rec['results']]}, rank 0 {sizes}")
    out = []
    for k, nbytes in enumerate(sizes):
        per_rank = [rec["results"][k] for rec in records]
        # The rank that failed says why; the others only that someone did.
        notes = sorted((res["graph_note"] for res in per_rank if res.get("graph_note")),
                       key=lambda note: note == CAPTURE_FAILED_ELSEWHERE)
        bad = sorted({path for res in per_rank for path, w in (res.get("wrong_by_path") or {}).items() if w})
        out.append(_size_result(
            op, world_size, nbytes, per_rank[0]["requested_bytes"],
            [res["time_s"] for res in per_rank],
            {rank: res["wrong"] for rank, res in enumerate(per_rank)},
            {rank: res["first_bad"] for rank, res in enumerate(per_rank) if res["wrong"]},
            graph_times=[res.get("graph_time_s") for res in per_rank],
            graph_note=notes[0] if notes else None,
            bad_paths=tuple(bad),
        ))
    return out


def combine_loop(op: str, world_size: int, rank_records: list[dict[str, Any]]) -> SizeResult:
    """Per-rank `measure_loop` records -> one (unchecked) SizeResult."""
    records = _by_rank(op, world_size, rank_records)
    return _size_result(op, world_size, records[0]["bytes"], records[0]["requested_bytes"],
                        [r["time_s"] for r in records], {r["rank"]: None for r in records}, {})


def _us(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1e6:.2f}"


def format_table(op: str, results: list[SizeResult]) -> str:
    """An nccl-tests-like table: size, count, time (us) and busbw of the path that counts, which path,
    both paths' times, #wrong. GB/s = 1e9 B/s."""
    n = results[0].world_size if results else "?"
    lines = [
        f"# {op}, {n} ranks, float32, slowest rank's mean time per call; path: the faster of eager calls "
        "and CUDA-graph replay (graph timed up to graph_up_to)",
        f"#{'size':>11} {'count':>13} {'time':>10} {'algbw':>8} {'busbw':>8} {'path':>6} {'eager':>10} "
        f"{'graph':>10} {'#wrong':>7}",
        f"#{'(B)':>11} {'(elements)':>13} {'(us)':>10} {'(GB/s)':>8} {'(GB/s)':>8} {'':>6} {'(us)':>10} "
        f"{'(us)':>10} {'':>7}",
    ]
    notes = []
    for r in results:
        wrong = "-" if r.wrong is None else str(r.wrong)
        lines.append(f" {r.bytes:>11} {r.bytes // ELEMENT_BYTES:>13} {r.time_s * 1e6:>10.2f} "
                     f"{r.algbw / 1e9:>8.2f} {r.busbw / 1e9:>8.2f} {r.path:>6} {_us(r.eager_time_s):>10} "
                     f"{_us(r.graph_time_s):>10} {wrong:>7}")
        if r.graph_note and r.graph_note not in notes:
            notes.append(r.graph_note)
    lines += [f"# graph path: {note}" for note in notes]
    return "\n".join(lines)
