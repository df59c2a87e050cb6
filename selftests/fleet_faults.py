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

import torch.distributed as dist
from selftests.slowdown import PAIR_SLOWDOWN, SLOWDOWN, Slowdown

from wirecheck.measure import collective_worker
from wirecheck.fleet import pairs
from wirecheck.vocab.ops import COLLECTIVES

DELAY_S = 0.3  # per call at least, and SLOWDOWN x this process's quickest call of its kind (slowdown.py)
# The torch.distributed function of every op's kernel: its row's `torch`, or (a kernel of its own, as
# broadcast) the function of the op's name.
_SLOWED = tuple(dict.fromkeys(row.torch or row.name for row in COLLECTIVES.values()))


_delay = Slowdown(DELAY_S)  # keyed by (function, the first tensor's bytes); `times` set by the worker below


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
            return _delay.call((_original.__name__, _size(args)), lambda: _original(*args, **kwargs))

        slow._fleet_faults_slow = True
        setattr(dist, name, slow)


def slow_collective(ctx, **kwargs):
    _slow_down()
    _delay.times = SLOWDOWN  # every rank of this node's groups is slowed (slowdown.py)
    return collective_worker.measure(ctx, **kwargs)


def slow_pair(ctx, **kwargs):
    _slow_down()
    _delay.times = PAIR_SLOWDOWN  # paired with a good node, which waits for this one alone
    return pairs.measure_pair(ctx, **kwargs)


def broken_collective(ctx, **kwargs):
    """This node's measurement raises before its first collective (a driver error, an OOM)."""
    raise RuntimeError(f"fleet_faults: rank {ctx.rank} broke on purpose")
