"""A burn-in round on one GPU, in a worker: every rank of one group over the burn-in's GPUs, joined in
one process group, runs this at once.

The GEMM load runs on a CUDA stream of its own, two windows queued ahead so the device never waits for
the host (wirecheck.gpu.sustained's windows: TFLOP/s per window, one product in `check_every` compared
bit for bit with the reference). Meanwhile the collective cycle runs on the default stream, each step
among the ranks of one placement (a torch.distributed sub-group of the one process group), at one size,
timed and checked element by element (wirecheck.measure.collective_worker.measure_beside). Kernels of one
process on two streams run side by side, as a training step's compute and communication do; kernels of
two processes on one GPU only take turns (time slices, without MPS): an NCCL kernel would wait for its
peer's turn, and both figures would measure the turns, not the hardware.

Each iteration: queue windows up to the depth, finish the windows the device has passed, vote (a
one-element all_reduce MAX over every rank: a rank that must stop stops them all before the same step,
so no rank waits in a collective the others never join), then this rank's part of the next step. A rank
must stop when the round's time is up, when the stop file exists (written by the parent: Ctrl-C, an
XID, ...; or by a rank: a wrong GEMM result or collective), or when it computed a wrong result itself.
Before each vote and each step it writes what it does and since when to `progress_dir/rank<r>`: the
parent names a hung step from it, and notices the hang before the call's deadline.

torch is imported here: only the worker processes import this module.
"""

from __future__ import annotations

import collections
import contextlib
import os
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch
import torch.distributed as dist

from wirecheck.gpu import gemm
from wirecheck.gpu.stopwatch import Stopwatch
from wirecheck.gpu.sustained import finish_window, next_products, queue_window
from wirecheck.gpu.worker import memory  # noqa: F401  the memory test between rounds, on the same workers
from wirecheck.measure.collective_worker import measure_beside
from wirecheck.workers import subgroups

if TYPE_CHECKING:
    from wirecheck.workers.worker import RankContext

DEPTH = 2  # GEMM windows queued ahead on a GPU (on CPU a window runs as it is queued)
HOST_BUFFERS = DEPTH + 1  # each window's tally lands in a pinned buffer of its own until it is read

# Why a rank stopped: the round's time is up, the stop file exists, or it saw a wrong result itself.
TIME_UP, ASKED, WRONG = "time up", "asked to stop", "wrong result"


@dataclass
class _State:
    """What a rank keeps from one round to the next (one burn-in per worker group)."""

    a: torch.Tensor
    b: torch.Tensor
    ref: torch.Tensor
    out: torch.Tensor
    nonfinite: int
    digest: str | None
    stream: Any  # the load's CUDA stream; None on CPU
    hosts: list
    products: int  # the last window's size: the next round starts at the load's rate
    groups: dict = field(default_factory=dict)  # ranks of a placement -> its process group


_STATE: dict[tuple, _State] = {}


def _state(ctx: RankContext, n: int, seed: int, check_every: int, steps: list[dict]) -> _State:
    key = (n, seed)
    if key not in _STATE:
        r = gemm.reference(n, seed, ctx.device)
        cuda = ctx.device.type == "cuda"
        stream = torch.cuda.Stream(ctx.device) if cuda else None
        if stream is not None:
            stream.wait_stream(torch.cuda.current_stream(ctx.device))  # the reference is made before any window
        hosts = [torch.empty(3, dtype=torch.int64, pin_memory=cuda) for _ in range(HOST_BUFFERS)]
        _STATE[key] = _State(r["a"], r["b"], r["ref"], r["out"], r["nonfinite"], gemm.digest(r["ref"]), stream, hosts,
                             check_every)
    st = _STATE[key]
    # Every rank makes every sub-group, in the steps' order (torch.distributed.new_group is collective); the
    # pool made those of its placements at its start already (wirecheck.workers.subgroups: one registry).
    for step in steps:
        ranks = tuple(step["ranks"])
        if ranks not in st.groups:
            st.groups[ranks] = subgroups.add(ctx, ranks)
    return st


def raise_stop(stop_path: str, why: str) -> None:
    """Tell every rank of the group, and the parent, to stop (they share the node's file system)."""
    try:
        with open(stop_path, "a", encoding="utf-8") as f:
            f.write(f"{why}\n")
    except OSError:
        pass  # the parent's folder is gone: the parent is stopping anyway


def _progress(progress_dir: str, rank: int, doing: str) -> None:
    try:
        with open(os.path.join(progress_dir, f"rank{rank}"), "w", encoding="utf-8") as f:
            f.write(f"{time.time():.3f} {doing}\n")
    except OSError:
        pass


def _vote(ctx: RankContext, stop: bool) -> bool:
    """True when any rank must stop (every rank gets the same answer)."""
    if ctx.world_size == 1:
        return stop
    flag = torch.tensor([1 if stop else 0], dtype=torch.int32, device=ctx.device)
    dist.all_reduce(flag, op=dist.ReduceOp.MAX)
    return bool(flag.item())  # waits for the default stream only: the load's stream keeps computing


def _on(stream):
    return torch.cuda.stream(stream) if stream is not None else contextlib.nullcontext()


def load_round(ctx: RankContext, n: int, duration_s: float, window_s: float, check_every: int, seed: int,
               steps: list[dict], first_step: int, warmup_iters: int, iters: int, stop_path: str,
               progress_dir: str) -> dict[str, Any]:
    """One round: the GEMM load for `duration_s` beside the collective cycle from step `first_step`
    (`steps`: [{"placement", "ranks", "op", "size"}], the whole cycle, the same on every rank).

    Returns the windows and their comparisons as wirecheck.gpu.sustained.run does, and `steps`: the
    steps this rank took part in ({"step", "placement", "op", "t", plus measure_beside's result}),
    `next_step` (where the next round goes on) and `stopped` (why the round ended)."""
    device = ctx.device
    st = _state(ctx, n, seed, check_every, steps)
    watch = Stopwatch(device)
    depth = DEPTH if watch.cuda else 1
    queue: collections.deque = collections.deque()
    windows: list[dict] = []
    taken: list[dict] = []
    first_mismatch = None
    wrong_step = None
    turn, k = 0, first_step
    began = time.time()
    end_at = began + duration_s
    stopped = None

    def finish(oldest) -> None:
        nonlocal first_mismatch
        window, first = finish_window(oldest, watch, n)
        if first is not None and first_mismatch is None:
            first_mismatch = {"window": len(windows), "index": first, "row": first // n, "col": first % n}
            raise_stop(stop_path, f"rank {ctx.rank}: wrong GEMM result in window {len(windows)}")
        windows.append(window)
        st.products = next_products(window, window_s, check_every)

    while True:
        if first_mismatch is not None or wrong_step is not None:
            stopped = WRONG
        elif os.path.exists(stop_path):
            stopped = ASKED
        elif time.time() >= end_at:
            stopped = TIME_UP
        while stopped is None and len(queue) < depth:
            with _on(st.stream):
                queue.append(queue_window(st.a, st.b, st.ref, st.out, st.products, check_every, watch,
                                          st.hosts[turn % HOST_BUFFERS]))
            turn += 1
        while queue and (not watch.cuda or queue[0].end.query()):
            finish(queue.popleft())
        _progress(progress_dir, ctx.rank, f"vote before step {k}")
        if _vote(ctx, stopped is not None):
            stopped = stopped or ASKED
            break
        if not steps:
            if queue:
                finish(queue.popleft())  # nothing to send: wait for the load's oldest window
            continue
        step = steps[k % len(steps)]
        k += 1
        if ctx.rank not in step["ranks"]:
            continue
        _progress(progress_dir, ctx.rank, f"step {k - 1}: {step['op']} on {step['placement']}")
        result = measure_beside(ctx, step["op"], step["size"], warmup_iters, iters, st.groups[tuple(step["ranks"])],
                                list(step["ranks"]))
        taken.append({"step": k - 1, "placement": step["placement"], "op": step["op"], "t": time.time(), **result})
        if result["wrong"] and wrong_step is None:
            wrong_step = k - 1
            raise_stop(stop_path, f"rank {ctx.rank}: wrong {step['op']} result on {step['placement']} (step {k - 1})")
    while queue:
        finish(queue.popleft())
    _progress(progress_dir, ctx.rank, "round done")
    if watch.cuda:
        torch.cuda.synchronize(device)
        torch.cuda.empty_cache()  # the memory test after the round gets what the collectives held
    return {
        "n": n,
        "duration_s": duration_s,
        "window_s": window_s,
        "check_every": check_every,
        "began": began,
        "ended": time.time(),
        "stopped": stopped,
        "windows": windows,
        "math": {"checked": sum(w["checked"] for w in windows),
                 "mismatched_results": sum(w["mismatched_results"] for w in windows),
                 "mismatched_elements": sum(w["mismatched_elements"] for w in windows),
                 "first": first_mismatch, "reference_nonfinite": st.nonfinite, "reference_digest": st.digest},
        "steps": taken,
        "next_step": k,
    }
