"""Sub-groups of one worker group: a placement's ranks inside a pool of one worker per GPU.

The pool (wirecheck.workers.pool.WorkerPool) starts one WorkerGroup over every GPU it
serves, joined in one process group, and makes a torch.distributed sub-group per placement once, at
its start. `torch.distributed.new_group` is collective over the whole job: every rank takes part in
creating every group, in the same order, even the groups it is not in (as the burn-in does,
wirecheck.burnin.worker). A call on a placement then goes to every rank: the placement's ranks run
the worker function with a context numbered within the sub-group (`RankContext.group` its process
group), the others return None at once. Each rank runs one call at a time, in the same order as
every other rank, so collectives on overlapping sub-groups can never wait on each other.

Worker side: `make` and `call` (run in the workers; torch is imported inside them). Parent side:
`SubGroup`, which `run`s like a WorkerGroup and returns the values of its own ranks; a failure names
the placement (the call's label), never the pool.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from wirecheck.workers import protocol

if TYPE_CHECKING:
    from wirecheck.workers.deadlines import Deadline
    from wirecheck.workers.launcher import WorkerGroup
    from wirecheck.workers.worker import RankContext

MAKE_WORKER = "wirecheck.workers.subgroups:make"
CALL_WORKER = "wirecheck.workers.subgroups:call"

# Worker side: the job's ranks of a sub-group -> its process group, made once per process.
_GROUPS: dict[tuple[int, ...], Any] = {}


# ---- worker side ----------------------------------------------------------------------------------

def add(ctx: RankContext, ranks) -> Any:
    """Make the sub-group of `ranks` (every rank of the job calls this, in the same order); the whole
    job's ranks are the job's own group."""
    import torch.distributed as dist

    key = tuple(ranks)
    if key not in _GROUPS:
        _GROUPS[key] = dist.group.WORLD if len(key) == ctx.world_size else dist.new_group(list(key))
    return _GROUPS[key]


def make(ctx: RankContext, groups: list[list[int]]) -> dict[str, Any]:
    """Worker function: every sub-group of `groups` not made yet, in the order given (the same list on
    every rank)."""
    for ranks in groups:
        add(ctx, ranks)
    return {"rank": ctx.rank, "groups": len(_GROUPS)}


def view(ctx: RankContext, ranks, label: str | None = None) -> RankContext:
    """This rank's context inside the sub-group of `ranks` (made before): numbered within it."""
    key = tuple(ranks)
    if key not in _GROUPS:
        raise LookupError(f"no sub-group of ranks {list(key)} in this worker (made: {sorted(_GROUPS)}); "
                          "the pool makes every placement's at its start")
    return dataclasses.replace(ctx, rank=key.index(ctx.rank), world_size=len(key), group=_GROUPS[key],
                               group_ranks=key, label=label or ctx.label)


def call(ctx: RankContext, ranks: list[int], fn: str, kwargs: dict[str, Any], label: str | None = None,
         grouped: bool = True) -> Any:
    """Worker function: `fn` on the ranks of one sub-group with the sub-group's context; None elsewhere.
    grouped=False: work of each GPU on its own (the GPU load), on the job's context (its `group_ranks` the
    ranks of this call), no sub-group needed."""
    if ctx.rank not in ranks:
        return None
    from wirecheck.workers.worker import resolve

    here = (view(ctx, ranks, label) if grouped
            else dataclasses.replace(ctx, label=label or ctx.label, group_ranks=tuple(ranks)))
    return resolve(fn)(here, **kwargs)


# ---- parent side ----------------------------------------------------------------------------------

class SubGroup:
    """The ranks of one placement inside a pool's WorkerGroup, used as a WorkerGroup of their own."""

    def __init__(self, group: WorkerGroup, ranks: tuple[int, ...], label: str, grouped: bool = True):
        self.group = group
        self.ranks = tuple(ranks)
        self.label = label
        self.grouped = grouped  # False: each rank works alone (no sub-group of these ranks need exist)
        self.world_size = len(self.ranks)

    @property
    def alive(self) -> bool:
        return self.group.alive

    @property
    def failure(self):
        return self.group.failure

    def run(self, fn: str, kwargs: dict[str, Any] | None, timeout_s: float | Deadline,
            what: str | None = None) -> list[Any]:
        """`fn(ctx, **kwargs)` on this placement's ranks; their values in rank order (WorkerGroup.run's errors,
        naming this placement)."""
        what = what or fn
        protocol.check_function_name(fn, f"{what} on {self.label}")
        values = self.group.run(CALL_WORKER, {"ranks": list(self.ranks), "fn": fn, "kwargs": kwargs or {},
                                              "label": self.label, "grouped": self.grouped},
                            timeout_s, what=what, label=self.label)
        return [values[r] for r in self.ranks]

    def close(self) -> None:
        """Nothing of its own to end: the pool's workers serve the next placement."""

    def __repr__(self) -> str:
        return f"SubGroup({self.label!r}, ranks={list(self.ranks)} of {self.group!r})"
