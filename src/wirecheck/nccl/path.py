"""NCCL's path as evidence: the environment that makes NCCL say it, the worker side, and the parent's reading.

The run's pool (one worker per GPU, a sub-group per placement: wirecheck.workers.subgroups) runs with
NCCL's INFO logging of communicator set-up on (init, graph search, environment; `POOL_SUBSYS`), each
rank writing its own file beside the run's record; `debug_env` adds only NCCL's logging variables to the
pool's environment, so the parent's switches (NCCL_NVLS_ENABLE=0 on a site that sets it) stay what the
collectives run with. `make_groups` makes every placement's sub-group and has each run every collective
once at a small size, so NCCL connects every pair (all_to_all does) while this process logs nothing else:
the bytes its file grew by between two offsets are that communicator's, and each rank returns those
offsets with the path of its file. The pytest process keeps them and reads a placement's lines from the
files itself (`read_lines`), without a call on the workers and without a group of its own: the path is
read from the very communicators that time the collectives, logged when the pool made them, and nothing
is logged per call (no TUNING), so the timed loops are not slowed. `debug_env` with the default
subsystems (TUNING too) is what `wirecheck diagnose`'s probes log with. Parsing is wirecheck.nccl.log's.

Parent side: `logging_start` (a pool's start that logs so and keeps each rank's offsets per placement,
a wirecheck.workers.pool.Start), `read_pool_log` (a placement's lines, read from the files) and
`read_lines`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from wirecheck.workers.pool import Start, WorkerPool
    from wirecheck.workers.worker import RankContext

# INIT: connections and ranks; GRAPH: topology paths and searched graphs; TUNING: algorithm,
# protocol and channels per collective; ENV: the NCCL_* switches NCCL saw.
DEBUG_SUBSYS = "INIT,GRAPH,TUNING,ENV"
# The pool's: what NCCL logs while a communicator is set up and connects (the P2P/SHM/NET connection lines
# are INIT|P2P...), never a line per collective call.
POOL_SUBSYS = "INIT,GRAPH,ENV"
MAKE_GROUPS_WORKER = "wirecheck.nccl.path:make_groups"


def debug_env(log_dir: str | Path, subsys: str = DEBUG_SUBSYS) -> dict[str, str]:
    """The environment for the probe's workers: NCCL logs at INFO into `log_dir` (one directory
    per placement), one file per process (NCCL expands %p to the pid; each rank returns its path)."""
    return {
        "NCCL_DEBUG": "INFO",
        "NCCL_DEBUG_SUBSYS": subsys,
        "NCCL_DEBUG_FILE": str(Path(log_dir) / "nccl.%p.log"),
    }


def log_path(template: str, pid: int) -> str:
    return template.replace("%p", str(pid))


def _own_log() -> str | None:
    template = os.environ.get("NCCL_DEBUG_FILE")
    return log_path(template, os.getpid()) if template else None


def _log_size() -> int:
    path = _own_log()
    try:
        return os.path.getsize(path) if path else 0
    except OSError:  # NCCL opens it at its first line
        return 0


def _connect(ctx: RankContext, ops: list[str], size: int) -> None:
    import torch

    from wirecheck.measure import collective_worker
    from wirecheck.vocab.ops import feasible_sizes

    for op in ops:
        if feasible_sizes(op, [size], ctx.world_size):
            collective_worker.measure(ctx, op, [size], warmup_iters=0, iters=1, check=False)
    if ctx.device.type == "cuda":
        torch.cuda.synchronize(ctx.device)


def group_key(ranks) -> str:
    """A sub-group's ranks as make_groups keys its log offsets: "0.1.2.3"."""
    return ".".join(str(r) for r in ranks)


def make_groups(ctx: RankContext, groups: list[list[int]], ops: list[str], size: int) -> dict[str, Any]:
    """Worker function, at a pool's start: every sub-group of `groups` made in order (every rank takes part
    in each, wirecheck.workers.subgroups.add), then on each, in the same order, its ranks run every op once
    at `size` so NCCL connects them. The log lines of each step are kept by offset: with one call at a
    time in this process, what NCCL wrote between two offsets is that communicator's. Returns this rank's
    log file, the byte ranges of each sub-group it is in (`slices`, by group_key) and the NCCL_* variables
    it ran with."""
    from wirecheck.workers import subgroups

    before_any = _log_size()  # the job's own communicator was made at the worker's start
    made = {}
    for ranks in groups:
        key = tuple(ranks)
        start = _log_size()
        subgroups.add(ctx, key)
        made[key] = (0, before_any) if len(key) == ctx.world_size else (start, _log_size())
    slices = {}
    for ranks in groups:
        key = tuple(ranks)
        if ctx.rank not in key:
            continue
        start = _log_size()
        _connect(subgroups.view(ctx, key), ops, size)
        slices[group_key(key)] = [list(made[key]), [start, _log_size()]]
    return {"rank": ctx.rank, "groups": len(made), "log_path": _own_log(), "slices": slices, "pid": os.getpid(),
            "nccl_env": {k: v for k, v in sorted(os.environ.items()) if k.startswith("NCCL_")}}


def read_lines(log_path: str | None, slices: list[list[int]]) -> str:
    """Parent side: one rank's NCCL log lines of one communicator, the byte ranges of its file make_groups
    returned for it ("" where NCCL wrote no file)."""
    if not log_path or not os.path.exists(log_path):
        return ""
    parts = []
    with open(log_path, "rb") as f:
        for start, end in slices:
            f.seek(start)
            parts.append(f.read(max(0, end - start)).decode("utf-8", errors="replace"))
    return "".join(parts)


def logging_start(log_root: str | Path, ops: list[str], size: int, fix: str) -> Callable[[int], Start]:
    """A pool's n-th start (wirecheck.workers.pool.Start) with NCCL logging its communicators' set-up into
    `log_root/pool-<n>/`, every sub-group connected by each op of `ops` at `size` (`make_groups`), and each
    rank's file and byte ranges kept per placement (`read_pool_log` reads them). NCCL writes its logs itself
    (fopen, following links): as root, only into a folder no other user can redirect (safefs.make_dirs;
    `fix` says what to do otherwise)."""
    from wirecheck.core.safefs import make_dirs
    from wirecheck.workers.pool import Start

    def start(n: int) -> Start:
        folder = make_dirs(Path(log_root) / f"pool-{n}", what="NCCL's log folder", fix=fix)
        return Start(MAKE_GROUPS_WORKER, {"ops": list(ops), "size": size}, debug_env(folder, POOL_SUBSYS),
                     keep=_logged)

    return start


def _logged(answers: list[dict], ranks_of: dict[str, tuple]) -> dict[str, list[dict]]:
    """From make_groups' answers: per placement, each of its ranks' NCCL log file, the byte ranges of the
    placement's communicator in it and the NCCL_* it ran with."""
    out = {}
    for pid, ranks in ranks_of.items():
        key = group_key(ranks)
        out[pid] = [{"rank": r["rank"], "pid": r.get("pid"), "log_path": r.get("log_path"),
                     "slices": r["slices"].get(key, []), "nccl_env": r.get("nccl_env") or {}}
                    for r in answers if key in (r.get("slices") or {})]
    return out


def read_pool_log(pool: WorkerPool, placement) -> list[dict]:
    """Each rank's NCCL log lines of the placement's communicator (rank, pid, log_path, text, nccl_env), as the
    pool start that made it for the collectives logged them: read from the files here, no call on the workers,
    no group started for it. Only a placement no start of the pool has made yet (`-k nccl_path` alone, a
    burn-in's forced_pcie) gets the pool started, its sub-group made as its collectives' would be."""
    pool.check(placement)
    if placement.id not in pool.kept:
        pool.shared(placement)
    return [{**{k: r[k] for k in ("rank", "pid", "log_path", "nccl_env")}, "text": read_lines(r["log_path"], r["slices"])}
            for r in pool.kept.get(placement.id, [])]

