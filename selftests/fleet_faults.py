"""A slow node, for the fleet self-tests only: worker functions that add a delay before every
collective of this process, then measure as the suite does.

Named on the slow node's command line (`--collective-worker fleet_faults:slow_collective
--pair-worker fleet_faults:slow_pair` for wirecheck.fleet.multinode, the `collective_worker` fixture for a
pytest run): the library has no switch for it. The delay is real time spent inside each collective
call on this rank, so every peer waits for it and the measured bandwidth drops, as with a node whose
PCIe link or NIC is slow.
"""

from __future__ import annotations

import functools
import time

import torch.distributed as dist

from wirecheck.measure import collective_worker
from wirecheck.fleet import pairs
from wirecheck.vocab.ops import COLLECTIVES

DELAY_S = 0.3  # per call: 10-30x a simulated 4 MiB all_reduce, far past CPU noise
# The torch.distributed function of every op's kernel: its row's `torch`, or (a kernel of its own, as
# broadcast) the function of the op's name.
_SLOWED = tuple(dict.fromkeys(row.torch or row.name for row in COLLECTIVES.values()))


def _slow_down() -> None:
    for name in _SLOWED:
        original = getattr(dist, name)
        if getattr(original, "_fleet_faults_slow", False):
            continue

        @functools.wraps(original)
        def slow(*args, _original=original, **kwargs):
            time.sleep(DELAY_S)
            return _original(*args, **kwargs)

        slow._fleet_faults_slow = True
        setattr(dist, name, slow)


def slow_collective(ctx, **kwargs):
    _slow_down()
    return collective_worker.measure(ctx, **kwargs)


def slow_pair(ctx, **kwargs):
    _slow_down()
    return pairs.measure_pair(ctx, **kwargs)


def broken_collective(ctx, **kwargs):
    """This node's measurement raises before its first collective (a driver error, an OOM)."""
    raise RuntimeError(f"fleet_faults: rank {ctx.rank} broke on purpose")
