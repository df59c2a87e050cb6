"""What the host did while steps were timed: the machine's steal and Python's GC.

A strategy whose step waits on its Python hooks runs at the host's speed, so its tokens/s moves
with anything that slows the host. These figures go into each record so a slow or unsteady run
says whether the hypervisor or the garbage collector took the time:
- steal_fraction: the share of the machine's CPU time the hypervisor gave to others while the
  steps ran (/proc/stat "steal"); None where the kernel does not report it.
- gc_collections / gc_s: Python garbage collections during the steps and the time they took.
- python_loop_s: the best of 5 runs of a fixed pure-Python loop (dict and attribute work, as
  hook bookkeeping does) taken just before the steps: this host's single-thread Python speed,
  comparable between runs and machines. On 2x H200 the ZeRO-3 figure followed the host's
  speed from run to run (42.0k-79.8k tokens/s as DeepSpeed's setup took 13.5-8.9 s, 2026-12-01).

Not the process's CPU time: CUDA's synchronising calls spin by default, so a GPU-bound DDP rank
used 76.7 ms of CPU per 76.2 ms step on 2x H200 (2026-12-01), as much as a host-bound one.
"""

from __future__ import annotations

import gc
import time
from dataclasses import dataclass, field


def _cpu_jiffies() -> tuple[int, int] | None:
    """(steal, total) jiffies of all CPUs since boot, or None without /proc/stat."""
    try:
        with open("/proc/stat") as f:
            fields = f.readline().split()
    except OSError:
        return None
    if not fields or fields[0] != "cpu" or len(fields) < 9:
        return None
    values = [int(v) for v in fields[1:]]
    # user nice system idle iowait irq softirq steal [guest guest_nice: already inside user/nice]
    return values[7], sum(values[:8])


PYTHON_LOOP_ITERATIONS = 100_000


def python_loop_s(repeats: int = 5) -> float:
    """Seconds for PYTHON_LOOP_ITERATIONS rounds of dict/attribute/call work, best of `repeats`."""
    class Slot:
        __slots__ = ("value",)

        def __init__(self) -> None:
            self.value = 0

    best = float("inf")
    for _ in range(repeats):
        table: dict[int, Slot] = {}
        t0 = time.perf_counter()
        for i in range(PYTHON_LOOP_ITERATIONS):
            slot = table.get(i & 255)
            if slot is None:
                slot = table[i & 255] = Slot()
            slot.value += len(table)
        best = min(best, time.perf_counter() - t0)
    return best


@dataclass
class GCWatch:
    """Counts collections and their time through gc.callbacks while installed."""

    collections: int = 0
    seconds: float = 0.0
    _started: float | None = field(default=None, repr=False)

    def __call__(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        elif self._started is not None:
            self.collections += 1
            self.seconds += time.perf_counter() - self._started
            self._started = None

    def __enter__(self) -> "GCWatch":
        gc.callbacks.append(self)
        return self

    def __exit__(self, *exc) -> None:
        gc.callbacks.remove(self)


class HostWatch:
    """Brackets the timed steps: `with HostWatch() as host: ...; host.figures()`."""

    def __enter__(self) -> "HostWatch":
        self._python_loop_s = python_loop_s()
        self._jiffies0 = _cpu_jiffies()
        self._gc = GCWatch().__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self._gc.__exit__(*exc)
        self._jiffies1 = _cpu_jiffies()

    def figures(self) -> dict:
        steal = None
        if self._jiffies0 is not None and self._jiffies1 is not None:
            total = self._jiffies1[1] - self._jiffies0[1]
            steal = (self._jiffies1[0] - self._jiffies0[0]) / total if total > 0 else 0.0
        return {"steal_fraction": steal, "gc_collections": self._gc.collections, "gc_s": self._gc.seconds,
                "python_loop_s": self._python_loop_s}
