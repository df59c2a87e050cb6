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

DELAY_S = 0.3  # per call at least: 10-30x a simulated 4 MiB all_reduce on a quiet machine
# And at least this many times the call's own cost as measured here: on a loaded machine a simulated
# 4 MiB all_reduce took 50 ms, and a fixed 0.3 s made the node only 6x slower than its peers, short of
# the simulated fleet rule's 10x (thresholds.yaml, fleet.simulated). The shortest call seen is the
# transfer alone (a longer one also waited for a peer); kept per function and size.
SLOWDOWN = 25
# The torch.distributed function of every op's kernel: its row's `torch`, or (a kernel of its own, as
# broadcast) the function of the op's name.
_SLOWED = tuple(dict.fromkeys(row.torch or row.name for row in COLLECTIVES.values()))


_shortest: dict = {}  # (function, the first tensor's bytes) -> seconds: the quickest such call so far


def _size(args) -> int:
    t = args[0] if args else None
    if isinstance(t, (list, tuple)):
        t = t[0] if t else None
    return t.numel() * t.element_size() if hasattr(t, "numel") else 0


def _slow_down() -> None:
    for name in _SLOWED:
        original = getattr(dist, name)
        if getattr(original, "_fleet_faults_slow", False):
            continue

        @functools.wraps(original)
        def slow(*args, _original=original, **kwargs):
            key = (_original.__name__, _size(args))
            time.sleep(max(DELAY_S, SLOWDOWN * _shortest.get(key, 0.0)))
            t0 = time.perf_counter()
            out = _original(*args, **kwargs)
            _shortest[key] = min(_shortest.get(key, float("inf")), time.perf_counter() - t0)
            return out

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
