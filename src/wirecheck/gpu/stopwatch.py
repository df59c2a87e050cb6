"""Time on the device: CUDA events on the current stream, or the host clock on CPU (where
torch runs every op before returning, so the host clock is the op's time)."""

from __future__ import annotations

import statistics
import time
from typing import Any, Callable

import torch


class Stopwatch:
    def __init__(self, device: torch.device):
        self.cuda = device.type == "cuda"

    def mark(self) -> Any:
        if self.cuda:
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            return event
        return time.perf_counter()

    def wait(self, mark: Any) -> None:
        """Until the device has passed `mark` (at once on CPU)."""
        if self.cuda:
            mark.synchronize()

    def seconds(self, start: Any, end: Any) -> float:
        return start.elapsed_time(end) / 1e3 if self.cuda else end - start

    def each(self, op: Callable[[], Any], warmup_iters: int, iters: int) -> list[float]:
        """Seconds of each of `iters` back-to-back calls of `op` after `warmup_iters` untimed ones.

        One event between two calls costs nothing measurable on the device, and per-call times
        let the caller take the median: one slow call (a clock ramp, a context switch) does not
        move it, a GPU whose clocks sag for good does."""
        for _ in range(warmup_iters):
            op()
        marks = [self.mark()]
        for _ in range(iters):
            op()
            marks.append(self.mark())
        self.wait(marks[-1])
        return [self.seconds(a, b) for a, b in zip(marks, marks[1:])]


def summary(times: list[float], work: float) -> dict[str, float]:
    """`work` per second (bytes, FLOP) at the median call and at the fastest, with the call times and
    their spread: (p90 - p10) / median of the call times (max - min under 10 calls), kept in the record
    so that calibration and the history rule know how steady this figure was within the run."""
    median = statistics.median(times)
    best = min(times)
    if len(times) >= 10:
        deciles = statistics.quantiles(times, n=10)
        spread = (deciles[-1] - deciles[0]) / median
    else:
        spread = (max(times) - best) / median
    return {"per_s": work / median, "best_per_s": work / best, "median_s": median, "min_s": best,
            "max_s": max(times), "calls": len(times), "spread": spread}
