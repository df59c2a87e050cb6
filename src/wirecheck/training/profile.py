"""A short torch.profiler look at a few training steps: where the step's time goes on the device.

From the device timeline of the profiled steps (kernels, copies and NCCL kernels on every
stream), per step:
- busy: time any kernel runs; idle = window - busy: the GPU waits for the CPU (launch- or
  hook-bound steps: DeepSpeed ZeRO-3's per-module hooks, FSDP's pre/post hooks) or for the peer;
- compute: time a non-communication kernel (or copy) runs;
- comm: time an NCCL kernel runs; comm_only = comm not overlapped by compute: communication
  on the critical path (an NCCL kernel also spins while it waits for the other rank, so this
  includes the peer's lateness);
- the top kernels by time, and the largest idle gaps.
Only CUDA activity is recorded on GPUs (cheap: no CPU-op tracing). On CPU (gloo, CI) the CPU
ops are the timeline and gloo/c10d ops count as communication: the same code runs, but the
split only means something on GPUs.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Callable, Iterable

COMM, COMPUTE, COPY = "comm", "compute", "copy"
COMM_MARKERS = ("nccl", "gloo", "c10d::", "allreduce", "all_reduce", "allgather", "all_gather",
                "reduce_scatter", "reducescatter", "broadcast")
TOP_KERNELS = 8
NAME_CHARS = 90
GAP_NS = 20_000  # idle stretches longer than this are counted as gaps (a kernel launch is ~5 µs)


def classify(name: str) -> str:
    low = name.lower()
    if any(marker in low for marker in COMM_MARKERS):
        return COMM
    if low.startswith(("memcpy", "memset")):
        return COPY
    return COMPUTE


def union(intervals: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """Sorted, disjoint intervals covering the same points."""
    out: list[list[int]] = []
    for start, end in sorted(intervals):
        if end <= start:
            continue
        if out and start <= out[-1][1]:
            out[-1][1] = max(out[-1][1], end)
        else:
            out.append([start, end])
    return [(a, b) for a, b in out]


def total(intervals: list[tuple[int, int]]) -> int:
    return sum(b - a for a, b in intervals)


def overlap(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> int:
    """Length of the intersection of two disjoint sorted interval lists."""
    i = j = 0
    length = 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if hi > lo:
            length += hi - lo
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return length


def gaps(busy: list[tuple[int, int]], min_ns: int = GAP_NS) -> list[int]:
    """Idle stretches between busy intervals longer than min_ns, longest first."""
    return sorted((b[0] - a[1] for a, b in zip(busy, busy[1:]) if b[0] - a[1] > min_ns), reverse=True)


def summarize(events: list[tuple[str, int, int]], n_steps: int) -> dict:
    """events: (name, start_ns, end_ns) of device work. Figures are per step, in milliseconds."""
    if not events or n_steps < 1:
        return {"profiled_steps": n_steps, "events": 0}
    spans = defaultdict(list)
    per_name = defaultdict(lambda: [0, 0])
    for name, start, end in events:
        kind = classify(name)
        spans[kind].append((start, end))
        per_name[name][0] += 1
        per_name[name][1] += end - start
    busy = union(iv for ivs in spans.values() for iv in ivs)
    compute = union(spans[COMPUTE] + spans[COPY])
    comm = union(spans[COMM])
    window = busy[-1][1] - busy[0][0]
    idle_gaps = gaps(busy)

    def ms(ns: float) -> float:
        return ns / 1e6 / n_steps

    top = sorted(per_name.items(), key=lambda kv: kv[1][1], reverse=True)[:TOP_KERNELS]
    return {
        "profiled_steps": n_steps,
        "events": len(events),
        "window_ms": ms(window),
        "busy_ms": ms(total(busy)),
        "idle_ms": ms(window - total(busy)),
        "compute_ms": ms(total(compute)),
        "copy_ms": ms(total(union(spans[COPY]))),
        "comm_ms": ms(total(comm)),
        "comm_only_ms": ms(total(comm) - overlap(comm, compute)),
        "comm_kernel_sum_ms": ms(sum(e - s for s, e in spans[COMM])),
        "idle_gaps": len(idle_gaps) / n_steps,
        "largest_gaps_ms": [g / 1e6 for g in idle_gaps[:5]],
        "top": [{"name": name[:NAME_CHARS], "kind": classify(name), "calls": calls / n_steps, "ms": ms(ns)}
                for name, (calls, ns) in top],
    }


def _device_events(prof, cuda: bool) -> list[tuple[str, int, int]]:
    out = []
    for e in prof.profiler.kineto_results.events():
        on_cuda = str(e.device_type()).endswith("CUDA")
        if on_cuda != cuda:
            continue
        start = e.start_ns()
        out.append((e.name(), start, start + e.duration_ns()))
    return out


def profile_steps(step: Callable[[int], None], n_steps: int, device, first_index: int = 0) -> dict:
    """Run `step(i)` n_steps times under torch.profiler; the summary of the device timeline."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    cuda = device.type == "cuda"
    activities = [ProfilerActivity.CUDA] if cuda else [ProfilerActivity.CPU]
    if cuda:
        torch.cuda.synchronize(device)
    with profile(activities=activities) as prof:
        for i in range(first_index, first_index + n_steps):
            step(i)
        if cuda:
            torch.cuda.synchronize(device)
    summary = summarize(_device_events(prof, cuda), n_steps)
    summary["timeline"] = "cuda kernels" if cuda else "cpu ops"
    return summary
