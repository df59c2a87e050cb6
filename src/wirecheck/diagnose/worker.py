"""The probes' worker function, run on a sub-group of the command's worker pool: `measure` (the collective
on the suspect's placement, or on a pair inside it, every element checked: measure.collective_worker's
own). One pool serves every pair, so a quad's six pairs cost no start of their own, and the parent reads
the links' counters between two calls: one pair's load each.

A self-test swaps this module for one that injects faults (selftests/diagnose_faults.py): the function is
named here once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from wirecheck.measure import collective_worker

if TYPE_CHECKING:
    from wirecheck.workers.worker import RankContext

# Named for the parent in wirecheck.diagnose.context (WORKERS, MEASURE), which imports no torch.


def measure(ctx: RankContext, **kwargs: Any) -> dict[str, Any]:
    return collective_worker.measure(ctx, **kwargs)
