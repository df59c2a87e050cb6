"""Python's garbage collector taken out of the step, as large training loops do.

Automatic collection runs whenever enough objects were allocated, in whichever step that
happens, and a full collection walks every live object (modules, parameters, DeepSpeed's and
FSDP's bookkeeping): tens of milliseconds landing in random steps of a host-bound strategy.
torchtitan (`training.gc_freq`, default 50), OLMo-core (GarbageCollectorCallback) and torchtnt
turn automatic collection off for training and collect the young generations every N steps;
this does the same. Reference cycles made during training are still freed at those points.
"""

from __future__ import annotations

import gc


class ManualGC:
    """gc_freq > 0: `start()` collects and disables automatic GC, `at_step(i)` collects the young
    generations every gc_freq steps, `stop()` restores the previous state. gc_freq 0: no-ops."""

    def __init__(self, gc_freq: int):
        if not isinstance(gc_freq, int) or isinstance(gc_freq, bool) or gc_freq < 0:
            raise ValueError(f"gc_freq must be a whole number >= 0, got {gc_freq!r}")
        self.gc_freq = gc_freq
        self._was_enabled: bool | None = None

    def start(self) -> None:
        if self.gc_freq and self._was_enabled is None:
            self._was_enabled = gc.isenabled()
            gc.collect()
            gc.disable()

    def at_step(self, i: int) -> None:
        if self.gc_freq and self._was_enabled is not None and i > 0 and i % self.gc_freq == 0:
            gc.collect(1)

    def stop(self) -> None:
        if self._was_enabled is not None:
            if self._was_enabled:
                gc.enable()
            self._was_enabled = None
