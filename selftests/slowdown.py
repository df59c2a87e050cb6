"""A delay before each call of a test-only slow worker (fleet_faults.py, diagnose_faults.py), large enough that the
slowed figure stays past its rule (the simulated rules name a node or pair 90 % below its peers: 10x slower)
however loaded the machine is.

A fixed delay is not: a call that takes 3 ms on a quiet machine took 34-50 ms on a loaded one, and a 0.3-s
delay then made the slow node only 6-9x slower than its peers. So the delay is also SLOWDOWN times the quickest
call of the same kind in this process: the quickest, because only it is the transfer alone (a longer one also
waited for a peer still asleep in its own delay, and a delay grown from that would feed on itself). The peers'
figure is their typical call, which on a loaded machine ran up to 3-4x this process's quickest (a CI run: a
12-ms quickest call against the peers' 34 ms, and 25x of it left the node 89 % below, short of the 90 % rule),
so a pair between one slow node and good ones (whose calls wait for nobody but it) takes PAIR_SLOWDOWN, room for 8x.
Where every rank of a group is slowed (a slow node's own run, a slow pair inside a quad) each rank's delay
also stretches its peers' calls, so the product grows with the delays: those keep SLOWDOWN. On a quiet machine
the floor is the larger.
"""

from __future__ import annotations

import time
from typing import Any, Callable

SLOWDOWN = 25  # times this process's quickest call of the same kind
PAIR_SLOWDOWN = 80  # the same, for one slow node paired with good ones


class Slowdown:
    """`call(key, fn)`: sleep max(floor_s, `times` x the quickest earlier call of `key`), then time `fn()`."""

    def __init__(self, floor_s: float, times: float = SLOWDOWN):
        self.floor_s = floor_s
        self.times = times
        self._quickest: dict[Any, float] = {}

    def call(self, key, fn: Callable[[], Any]) -> Any:
        time.sleep(max(self.floor_s, self.times * self._quickest.get(key, 0.0)))
        t0 = time.perf_counter()
        out = fn()
        self._quickest[key] = min(self._quickest.get(key, float("inf")), time.perf_counter() - t0)
        return out
