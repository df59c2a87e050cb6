"""NCCL's path as evidence: the worker side and the environment that makes NCCL say it.

A small, fresh worker group per placement runs with NCCL's INFO logging on (init, graph
search, tuning, environment), each rank writing its own file into the run's directory;
a few collectives make NCCL connect every pair (all_to_all does) and log the algorithm and
protocol it picked for each. The bandwidth measurements run in other processes, without
the logging, so this neither slows nor perturbs them. Parsing is wirecheck.nccl.log's.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from wirecheck.workers.worker import RankContext

# INIT: connections and ranks; GRAPH: topology paths and searched graphs; TUNING: algorithm,
# protocol and channels per collective; ENV: the NCCL_* switches NCCL saw.
DEBUG_SUBSYS = "INIT,GRAPH,TUNING,ENV"


def debug_env(log_dir: str | Path) -> dict[str, str]:
    """The environment for the probe's workers: NCCL logs at INFO into `log_dir` (one directory
    per placement), one file per process (NCCL expands %p to the pid; each rank returns its path)."""
    return {
        "NCCL_DEBUG": "INFO",
        "NCCL_DEBUG_SUBSYS": DEBUG_SUBSYS,
        "NCCL_DEBUG_FILE": str(Path(log_dir) / "nccl.%p.log"),
    }


def log_path(template: str, pid: int) -> str:
    return template.replace("%p", str(pid))


def probe(ctx: RankContext, ops: list[str], sizes: list[int]) -> dict[str, Any]:
    """Worker function: each op once at each size (no timing, no check), then this rank's NCCL log."""
    import torch

    from wirecheck.measure import collective_worker
    from wirecheck.vocab.ops import feasible_sizes

    for op in ops:
        # The smallest sizes of a sweep may be too small for a chunked op on these ranks.
        feasible = feasible_sizes(op, sizes, ctx.world_size)
        if feasible:
            collective_worker.measure(ctx, op, feasible, warmup_iters=0, iters=1, check=False)
    if ctx.device.type == "cuda":
        torch.cuda.synchronize(ctx.device)
    template = os.environ.get("NCCL_DEBUG_FILE")
    path = log_path(template, os.getpid()) if template else None
    text = ""
    if path and os.path.exists(path):
        # NCCL line-buffers its debug file, so everything logged so far is on disk.
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    return {"rank": ctx.rank, "pid": os.getpid(), "log_path": path, "text": text,
            "nccl_env": {k: v for k, v in sorted(os.environ.items()) if k.startswith("NCCL_")}}
