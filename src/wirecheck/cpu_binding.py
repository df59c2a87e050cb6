"""Binding a rank's threads to its own CPUs, as launchers do on GPU nodes.

Host-bound strategies (DeepSpeed's per-parameter hooks, FSDP's per-block Python) run as fast as
the rank's Python thread; unbound, the kernel may move it between cores or put another rank's
threads beside it. `torchrun --numa-binding exclusive` (torch 2.8+) gives each local rank a
disjoint share of its GPU's NUMA node; this does the same over the CPUs the worker may use.

Set by the launcher through WIRECHECK_CPU_BIND before the worker imports torch, so every thread
torch, NCCL and the autograd engine start later inherits it (Linux affinity is per thread and
is copied to threads at their creation).
"""

from __future__ import annotations

import os

ENV = "WIRECHECK_CPU_BIND"
MODES = ("none", "exclusive")


def share(cpus: list[int], local_rank: int, local_world_size: int) -> list[int]:
    """Rank `local_rank`'s contiguous share of `cpus` (sorted); ranks get disjoint, near-equal shares.

    Contiguous numbers: Linux numbers one thread of every core first and the SMT siblings after,
    so a contiguous share is distinct physical cores where there are enough of them.
    """
    if not 0 <= local_rank < local_world_size:
        raise ValueError(f"local rank {local_rank} outside 0..{local_world_size - 1}")
    cpus = sorted(cpus)
    if len(cpus) < local_world_size:
        return cpus  # fewer CPUs than ranks: sharing is unavoidable, binding would only pin them together
    per, extra = divmod(len(cpus), local_world_size)
    start = local_rank * per + min(local_rank, extra)
    return cpus[start:start + per + (1 if local_rank < extra else 0)]


def apply(mode: str, local_rank: int, local_world_size: int) -> list[int] | None:
    """Bind the calling thread (and the threads it creates later) per `mode`; the CPUs, or None unbound."""
    if mode not in MODES:
        raise ValueError(f"{ENV}={mode!r}: expected one of {MODES}")
    if mode == "none" or not hasattr(os, "sched_setaffinity"):
        return None
    cpus = share(sorted(os.sched_getaffinity(0)), local_rank, local_world_size)
    os.sched_setaffinity(0, cpus)
    return cpus
