"""Worker functions for the self-tests only: probes, and ways for a rank to misbehave.

They run inside `WorkerGroup` ranks as "selftests.faulty_workers:<name>" (the group passes the parent's
cwd and sys.path on, so this module resolves from the repository root). Breaking a collective's result
is done here by swapping a table entry in the worker process: the library has no switch for it.
"""

from __future__ import annotations

import ctypes
import dataclasses
import gc
import os
import signal
import subprocess
import sys
import time
from typing import Any

import torch

from wirecheck.measure import collective_worker
from wirecheck.vocab import ops as vocab
from wirecheck.workers.worker import RankContext
from wirecheck.workers import zygote


def whoami(ctx: RankContext, env_names: tuple[str, ...] = ()) -> dict[str, Any]:
    import torch.distributed as dist

    initialized = dist.is_available() and dist.is_initialized()
    return {
        "rank": ctx.rank,
        "world_size": ctx.world_size,
        "local_rank": ctx.local_rank,
        "backend": ctx.backend,
        "device": str(ctx.device),
        "label": ctx.label,
        "pid": os.getpid(),
        "is_rank_context": isinstance(ctx, RankContext),
        "dist_initialized": initialized,
        "dist_rank": dist.get_rank() if initialized else None,
        "env": {name: os.environ.get(name) for name in env_names},
    }


def all_reduce_ranks(ctx: RankContext) -> float:
    import torch
    import torch.distributed as dist

    t = torch.tensor([float(ctx.rank + 1)], device=ctx.device)
    dist.all_reduce(t)
    return float(t.item())


def _nested_failure(rank: int) -> None:
    raise ValueError(f"boom from rank {rank}")


def raise_on(ctx: RankContext, rank: int = 1, message: str | None = None) -> int:
    """`rank` raises from a nested function (ValueError, `message` if given); the others return their rank."""
    if ctx.rank == rank:
        if message:
            raise ValueError(message)
        _nested_failure(ctx.rank)
    return ctx.rank


def raise_then_barrier(ctx: RankContext, rank: int = 1) -> int:
    """`rank` raises; the others wait in a barrier that can never complete."""
    import torch.distributed as dist

    if ctx.rank == rank:
        _nested_failure(ctx.rank)
    dist.barrier()
    return ctx.rank


def hang_forever_here() -> None:
    while True:
        time.sleep(3600)


def hang(ctx: RankContext, rank: int = 1) -> int:
    """`rank` sleeps forever; the others return at once."""
    if ctx.rank == rank:
        hang_forever_here()
    return ctx.rank


def die(ctx: RankContext, rank: int = 1, how: str = "exit") -> int:
    """`rank` says so on stderr and dies (exit code 3, or SIGSEGV); the others sleep long."""
    if ctx.rank == rank:
        print(f"rank {rank} is about to die on purpose ({how})", file=sys.stderr, flush=True)
        if how == "segv":
            ctypes.string_at(0)  # NULL read: SIGSEGV; faulthandler prints the Python stack first
        os._exit(3)
    time.sleep(60)
    return ctx.rank


def unpicklable(ctx: RankContext) -> Any:
    return lambda: None


def spawn_grandchild(ctx: RankContext) -> int:
    """Start a long-lived child of this rank (like a compile or DataLoader worker); return its pid."""
    return subprocess.Popen(["sleep", "300"]).pid


def checked_rank(op: str, n: int) -> int:
    """A rank whose output the correctness check reads: rank 1 where every rank holds the result, else
    the root (a fault on a rank that holds no result is no fault)."""
    ranks = vocab.get(op).result_ranks(n)
    return 1 if 1 in ranks else ranks[0]


def flip(t: Any, index: int) -> None:
    """Element `index` (or the last) made wrong in any dtype: negated, less one (+1 alone is lost in bf16
    above 256)."""
    flat = t.view(-1)
    j = min(index, flat.numel() - 1)
    flat[j] = -(flat[j] + 1)


def _corrupting(launch: Any, flip_rank: int, flip_index: int, rank: int) -> Any:
    def launch_and_flip(inp: Any, out: Any, **kw: Any) -> None:
        launch(inp, out, **kw)
        if rank == flip_rank:
            flip(out, flip_index)

    return launch_and_flip


def measure_corrupt(ctx: RankContext, op: str, flip_rank: int | None = None, flip_index: int = 5, **kw: Any) -> dict:
    """collective_worker.measure with one output element of `flip_rank` (default: `checked_rank`) wrong
    after every call."""
    flip_rank = checked_rank(op, ctx.world_size) if flip_rank is None else flip_rank
    c = collective_worker.KERNELS[op]
    collective_worker.KERNELS[op] = dataclasses.replace(
        c, launch=_corrupting(c.launch, flip_rank, flip_index, ctx.rank))
    try:
        return collective_worker.measure(ctx, op=op, **kw)
    finally:
        collective_worker.KERNELS[op] = c


def pair_on_own_group(ctx: RankContext, size: int, flip_rank: int | None = None, flip_index: int = 5) -> dict:
    """wirecheck.fleet.pairs' measurement on a process group of its own (every rank of this group, as a
    node pair of two one-GPU nodes), with one output element of `flip_rank` off by one after every
    all_reduce when given: the pair path's fill, timing and check are the collectives' own."""
    import torch.distributed as dist

    from wirecheck.fleet import pairs

    group = dist.new_group(list(range(ctx.world_size)))
    original = dist.all_reduce

    def all_reduce_and_flip(tensor, *args, **kwargs):
        work = original(tensor, *args, **kwargs)
        if ctx.rank == flip_rank:
            tensor.view(-1)[flip_index] += 1.0
        return work

    dist.all_reduce = all_reduce_and_flip
    try:
        return pairs.measure_pair(ctx, group=group, group_ranks=list(range(ctx.world_size)), size=size,
                                  warmup_iters=1, iters=2)
    finally:
        dist.all_reduce = original
        dist.destroy_process_group(group)


def measure_stale(ctx: RankContext, op: str, stale_rank: int | None = None, **kw: Any) -> dict:
    """collective_worker.measure where `stale_rank`'s (default: `checked_rank`) output buffer is never
    written (the data goes elsewhere)."""
    stale_rank = checked_rank(op, ctx.world_size) if stale_rank is None else stale_rank
    c = collective_worker.KERNELS[op]

    def launch_elsewhere(inp: Any, out: Any, **kw: Any) -> None:
        if ctx.rank != stale_rank:
            return c.launch(inp, out, **kw)
        scratch_out = out.clone()
        scratch_in = scratch_out if inp is out else inp
        c.launch(scratch_in, scratch_out, **kw)

    collective_worker.KERNELS[op] = dataclasses.replace(c, launch=launch_elsewhere)
    try:
        return collective_worker.measure(ctx, op=op, **kw)
    finally:
        collective_worker.KERNELS[op] = c


def measure_refused(ctx: RankContext, op: str, **kw: Any) -> dict:
    """collective_worker.measure on a backend that refuses every reduction but sum, as gloo refuses avg in
    some torch versions."""
    c = collective_worker.KERNELS[op]

    def launch_or_refuse(inp: Any, out: Any, reduction: str = "sum", **kw: Any) -> None:
        if reduction != "sum":
            raise RuntimeError(f"Cannot use ReduceOp.{reduction.upper()} with Gloo (stood in by a self-test)")
        c.launch(inp, out, **kw)

    collective_worker.KERNELS[op] = dataclasses.replace(c, launch=launch_or_refuse)
    try:
        return collective_worker.measure(ctx, op=op, **kw)
    finally:
        collective_worker.KERNELS[op] = c


def measure_hang(ctx: RankContext, op: str, hang_rank: int = 1, hang_op: str = "all_reduce", **kw: Any) -> dict:
    """collective_worker.measure, except that `hang_rank` never comes to `hang_op`: the others wait for it
    inside the collective, as they would for a rank stuck on a broken link. Other ops run normally."""
    if op == hang_op and ctx.rank == hang_rank:
        hang_forever_here()
    return collective_worker.measure(ctx, op=op, **kw)


def run_out_of_memory(ctx: RankContext, wrapped: bool = False, **kw: Any) -> dict:
    """Rank 0 fails the way a CUDA allocator does when a model does not fit (`wrapped`: re-raised
    as a RuntimeError from it, as a framework might)."""
    if ctx.rank == 0:
        try:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 290.00 MiB (simulated by a self-test)")
        except torch.OutOfMemoryError as exc:
            if wrapped:
                raise RuntimeError("engine step failed") from exc
            raise
    return {"rank": ctx.rank}


def die_then_oom(ctx: RankContext) -> dict:
    """Rank 1 is killed; half a second later rank 0 raises an out-of-memory error."""
    if ctx.rank == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(0.5)
    raise torch.OutOfMemoryError("CUDA out of memory (simulated, after a peer died)")


def init_from_env_and_all_reduce(ctx: RankContext) -> float:
    """What Accelerate/DeepSpeed do in a group left to them: init_process_group from env://."""
    import torch.distributed as dist

    dist.init_process_group(backend=ctx.backend)
    try:
        return all_reduce_ranks(ctx)
    finally:
        dist.destroy_process_group()


def rendezvous_loop(ctx: RankContext, n: int) -> list[int]:
    """`n` rendezvous in a row through wirecheck.workers.rendezvous, each with a gloo group that all_reduces.

    Rank 0 hosts a store on a port the kernel picks (rendezvous.host); the port reaches the other
    ranks over this group (a start relays it through the parent); every rank then joins through
    env:// with rendezvous.env_for, the path init_process_group takes inside Accelerate/DeepSpeed.
    Returns the ports used.
    """
    import datetime

    import torch.distributed as dist

    from wirecheck.workers import rendezvous

    timeout = datetime.timedelta(seconds=30)
    ports = []
    for i in range(n):
        port = torch.zeros(1, dtype=torch.int64)
        server = rendezvous.host(30) if ctx.rank == 0 else None
        if server is not None:
            port[0] = server.port
        dist.broadcast(port, src=0)
        os.environ.update(rendezvous.env_for(int(port.item())))
        store, rank, world_size = next(dist.rendezvous("env://", rank=ctx.rank, world_size=ctx.world_size,
                                                       timeout=timeout))
        group = dist.ProcessGroupGloo(dist.PrefixStore(f"loop{i}", store), rank, world_size, timeout)
        x = torch.full((1,), float(ctx.rank + 1))
        group.allreduce([x]).wait()
        if x.item() != world_size * (world_size + 1) / 2:
            raise AssertionError(f"iteration {i}: all_reduce gave {x.item()}")
        ports.append(int(port.item()))
        del group, store
        dist.barrier()  # rank 0 keeps its store until every rank is done with it
        del server
    return ports


def raise_in_order(ctx: RankContext, first: int = 1, delay_s: float = 0.5) -> None:
    """Rank `first` raises at once, the others `delay_s` later: the lowest rank is not the first."""
    if ctx.rank != first:
        time.sleep(delay_s)
    raise ValueError(f"rank {ctx.rank} fails {'first' if ctx.rank == first else 'later'}")


def all_reduce_until_killed(ctx: RankContext, victim: int = 1, after_s: float = 0.5) -> int:
    """Every rank all_reduces 1 MiB in a loop; `victim` is SIGKILLed from a thread while inside one,
    as the OOM killer or an operator would."""
    import threading

    import torch.distributed as dist

    if ctx.rank == victim:
        def kill() -> None:
            time.sleep(after_s)
            print(f"rank {victim}: SIGKILL now, mid all_reduce", file=sys.stderr, flush=True)
            os.kill(os.getpid(), signal.SIGKILL)

        threading.Thread(target=kill, daemon=True).start()
    t = torch.ones(1 << 18, device=ctx.device)
    for _ in range(1_000_000):
        dist.all_reduce(t)
    return ctx.rank


def measure_hang_every_op(ctx: RankContext, op: str, hang_rank: int = 1, **kw: Any) -> dict:
    """collective_worker.measure where `hang_rank` never comes, for every op: a node whose wires move nothing."""
    if ctx.rank == hang_rank:
        hang_forever_here()
    return collective_worker.measure(ctx, op=op, **kw)


# ---- CUDA graphs without CUDA: the graph path's orchestration on gloo ------------------------------

class _ReplayedCalls:
    """A CPU stand-in for a captured CUDA graph: the launches it captured, called again on replay."""

    replaying = False  # set while a stand-in graph replays: lets a launch misbehave on that path only

    def __init__(self, launch, calls: int):
        self.launch, self.calls = launch, calls

    def replay(self) -> None:
        _ReplayedCalls.replaying = True
        try:
            for _ in range(self.calls):
                self.launch()
        finally:
            _ReplayedCalls.replaying = False


def measure_with_stand_in_graphs(ctx: RankContext, op: str, graph_time_s: float | None = None,
                                 corrupt_graph_rank: int | None = None, fail_capture_rank: int | None = None,
                                 **kw: Any) -> dict:
    """collective_worker.measure with wirecheck.measure.collective_timing's capture/replay swapped for CPU stand-ins,
    so the graph path's bookkeeping (which sizes, both paths checked, a failed capture) runs on gloo.

    graph_time_s: what the stand-in reports as the replay time (None: measured on the CPU).
    corrupt_graph_rank: that rank's output is off by one at element 5 after every replayed call.
    fail_capture_rank: that rank's capture raises as CUDA does when a capture is invalidated.
    """
    from wirecheck.measure import collective_timing as timing

    saved = {name: getattr(timing, name) for name in ("capture", "replay", "time_replay", "graph_unavailable")}

    def capture(ctx_, launch, calls):
        if ctx_.rank == fail_capture_rank:
            raise RuntimeError("CUDA error: operation not permitted when stream is capturing (stand-in)")
        return _ReplayedCalls(launch, calls)

    def time_replay(ctx_, graph, calls, replays=1, group=None):
        t0 = time.perf_counter()
        for _ in range(replays):
            graph.replay()
        measured = (time.perf_counter() - t0) / (calls * replays)
        return measured if graph_time_s is None else graph_time_s

    c = collective_worker.KERNELS[op]

    def launch_then_maybe_flip(inp: Any, out: Any, **kw: Any) -> None:
        c.launch(inp, out, **kw)
        if _ReplayedCalls.replaying and ctx.rank == corrupt_graph_rank:
            flip(out, 5)

    timing.capture = capture
    timing.replay = lambda ctx_, graph: graph.replay()
    timing.time_replay = time_replay
    timing.graph_unavailable = lambda ctx_, nccl_version, env=None: None
    collective_worker.KERNELS[op] = dataclasses.replace(c, launch=launch_then_maybe_flip)
    try:
        return collective_worker.measure(ctx, op=op, **kw)
    finally:
        collective_worker.KERNELS[op] = c
        for name, fn in saved.items():
            setattr(timing, name, fn)


def train_hang(ctx: RankContext, **kw: Any) -> dict:
    """A training run (any run_strategy arguments) that never returns: no step completes."""
    hang_forever_here()
    return {}


def nccl_pool_with_a_log(ctx: RankContext, groups: list[list[int]], ops: list[str], size: int,
                          log_lines: dict[str, list[str]]) -> dict[str, Any]:
    """gloo writes no NCCL log: while the real make_groups connects each sub-group, write this rank's lines of
    it where NCCL would (NCCL_DEBUG_FILE, %p the pid; `log_lines` by "0.1"-style ranks, the rank's own
    picked by the composed logs' pid prefix vm:41<rank>), as NCCL writes a communicator's lines then."""
    from wirecheck.nccl import path as nccl_path

    path = nccl_path.log_path(os.environ["NCCL_DEBUG_FILE"], os.getpid())
    real = nccl_path._connect

    def connect_and_log(view: RankContext, ops: list[str], size: int) -> None:
        lines = log_lines.get(".".join(map(str, view.group_ranks)), [])
        with open(path, "a") as f:
            f.write("".join(line + "\n" for line in lines if line.startswith(f"vm:41{view.rank}")))
        real(view, ops, size)

    nccl_path._connect = connect_and_log
    try:
        return nccl_path.make_groups(ctx, groups, ops, size)
    finally:
        nccl_path._connect = real


def environment(ctx: RankContext) -> dict[str, Any]:
    """What a rank's process was started with, as far as its work can tell: the spare-worker self-tests
    compare a rank taken from a spare with one started as a new interpreter."""
    return {"env": dict(os.environ), "path": list(sys.path), "cwd": os.getcwd(),
            "training_imported": sorted(m for m in ("deepspeed", "accelerate") if m in sys.modules),
            "trainer_modules": sorted(m for m in zygote.TRAINER_MODULES if m in sys.modules)}


def collector(ctx: RankContext) -> dict[str, int]:
    """What a full collection in this rank walks (`tracked`) and what it leaves out as frozen (`frozen`)."""
    return {"tracked": len(gc.get_objects()), "frozen": gc.get_freeze_count()}


def say(ctx: RankContext, text: str) -> int:
    print(text, flush=True)
    return os.getpid()
