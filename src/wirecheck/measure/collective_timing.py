"""Timing a collective on one rank: back-to-back eager calls, or the same calls captured once in a
CUDA graph and replayed. Worker side only (inside `launcher.WorkerGroup` ranks).

Why two paths: an eager torch.distributed call costs the host ~42-47 us on 2x H200 (docs/measurements.md)
whatever the size, so below a few MiB the eager loop times the host, not the wire. Replaying captured
calls launches them all at once (18.8-19.6 us per all_reduce up to 64 KiB there, below nccl-tests'
own launch floor). At larger sizes the device time hides the launch cost and the graph was the slower
one (8 and 64 MiB), so the caller times both where it matters and keeps the faster.

Capturing NCCL collectives under torch (ProcessGroupNCCL, torch >= 2.2, NCCL >= 2.9.6):
- warm up first, outside the capture: the communicator and NCCL's first-call setup must exist before;
- capture on a side stream (torch.cuda.graph does), with the collective called inside; its
  work.wait() makes the capture stream wait for NCCL's stream, which joins NCCL's stream back into
  the graph;
- captured work is not handed to ProcessGroupNCCL's watchdog (TORCH_NCCL_ASYNC_ERROR_HANDLING does
  not time out a replay): a hung replay is caught by WorkerGroup's hard timeout instead;
- capture_error_mode "thread_local": the watchdog thread keeps querying events of earlier eager work
  while we capture; under the default "global" mode such a call from another thread invalidates the
  capture;
- NCCL < 2.29 faults on captured collectives whose buffers span several allocator segments
  (expandable_segments; torch's test_nccl_cudagraph_multisegment): then no graphs.
- NCCL_GRAPH_MIXING_SUPPORT=0 (the launcher's default for workers): NCCL's support for captured
  launches in flight beside eager ones adds a dependency to every captured launch, 3-6 us per
  1-16 MiB call on 2x H200 (2026-12-01; same ring/Simple/24-channel choice as nccl-tests either
  way). Nothing here has both in flight: each path ends synchronised before the next starts.
"""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING, Callable

import torch
import torch.distributed as dist

if TYPE_CHECKING:
    from wirecheck.workers.worker import RankContext

Launch = Callable[[], None]

CAPTURE_ERROR_MODE = "thread_local"
MIN_NCCL_FOR_GRAPHS = (2, 9, 6)
MIN_NCCL_FOR_MULTISEGMENT = (2, 29, 0)


def is_cuda(ctx: RankContext) -> bool:
    return ctx.device.type == "cuda"


def line_up(ctx: RankContext, group=None) -> None:
    """All ranks (of `group`; None: the job's) enter the timed loop together and with an idle device."""
    if is_cuda(ctx):
        dist.barrier(group=group, device_ids=[ctx.device.index])
        torch.cuda.synchronize(ctx.device)
    else:
        dist.barrier(group=group)


def time_eager(ctx: RankContext, launch: Launch, iters: int, group=None) -> float:
    """Mean seconds per call over `iters` back-to-back calls on this rank (lined up with `group`'s ranks)."""
    line_up(ctx, group)
    if is_cuda(ctx):
        # Events on the current stream bracket the whole loop: ProcessGroupNCCL makes its stream wait
        # for the current one before each call and the current one wait for it after, so the time is
        # device time of the collectives, plus host launch gaps where the host is the slower side.
        return time_events(launch, iters)
    t0 = time.perf_counter()
    for _ in range(iters):
        launch()  # gloo calls return when done
    return (time.perf_counter() - t0) / iters


def time_events(launch: Callable[[], object], iters: int) -> float:
    """Mean seconds per call of `iters` back-to-back launches between two CUDA events on the current
    stream (collectives here, copies in copy_bandwidth)."""
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        launch()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 1e3 / iters


def _version_tuple(text: str | None) -> tuple[int, ...] | None:
    try:
        return tuple(int(x) for x in (text or "").split(".")[:3]) or None
    except ValueError:
        return None


def graph_unavailable(ctx: RankContext, nccl_version: str | None,
                      env: dict[str, str] | None = None) -> str | None:
    """Why captured replays cannot be timed on this rank, or None when they can."""
    if not is_cuda(ctx):
        return f"{ctx.backend} on {ctx.device.type}: no CUDA graphs, eager calls only"
    version = _version_tuple(nccl_version)
    if version is None:
        return "NCCL version unknown: graph capture of collectives not attempted"
    if version < MIN_NCCL_FOR_GRAPHS:
        return f"NCCL {nccl_version} cannot be captured in CUDA graphs (needs 2.9.6 or later)"
    env = os.environ if env is None else env
    alloc = ",".join(env.get(k, "") for k in ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF")).replace(" ", "")
    if "expandable_segments:True" in alloc and version < MIN_NCCL_FOR_MULTISEGMENT:
        return (f"expandable_segments is on and NCCL {nccl_version} < 2.29 faults on captured collectives "
                "over multi-segment buffers: eager calls only")
    return None


def capture(ctx: RankContext, launch: Launch, calls: int) -> torch.cuda.CUDAGraph:
    """`calls` back-to-back launches captured in one graph (nothing runs until replay)."""
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, capture_error_mode=CAPTURE_ERROR_MODE):
        for _ in range(calls):
            launch()
    return graph


def replay(ctx: RankContext, graph: torch.cuda.CUDAGraph) -> None:
    graph.replay()
    torch.cuda.synchronize(ctx.device)


def time_replay(ctx: RankContext, graph: torch.cuda.CUDAGraph, calls: int, replays: int = 1, group=None) -> float:
    """Mean seconds per captured call: one warm replay (the first uploads the graph), then `replays`
    back to back between two events. The start event passes before the host has submitted the
    first replay, so that submission is in the time; later replays are queued while the device
    runs, so more replays share it."""
    if replays < 1:
        raise ValueError(f"replays must be >= 1, got {replays}")
    replay(ctx, graph)
    line_up(ctx, group)
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(replays):
        graph.replay()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 1e3 / (calls * replays)
