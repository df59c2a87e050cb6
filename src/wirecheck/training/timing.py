"""Timing training steps until the median settles.

- `median_ci`: a distribution-free confidence interval for the median from order statistics
  (the sign-test interval): with n samples sorted, [x_(l), x_(n+1-l)] covers the true median
  with probability 1 - 2·P(Binomial(n, 1/2) <= l-1). No assumption about the shape of the
  step-time distribution, which has outliers (allocator growth, a late NCCL setup).
- `StopRule`: stop once the interval's farther end lies within `max_halfwidth` of the median
  (relative), or at the step ceiling.
- `StepClock`: per-step durations. On GPUs CUDA events recorded back to back on the current
  stream: the end of step i is the start of step i+1, so GPU time lost between steps (the CPU
  not keeping up) counts, and the host synchronises only when a chunk of steps is read. On
  CPU, perf_counter around each step (everything is synchronous there).
- `time_steps`: runs steps in chunks, reads the clock, combines the ranks' durations (slowest
  rank per step, so every rank holds the same samples and takes the same decision: a rank
  leaving the loop alone would hang the others in their next collective) and applies the rule.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Callable, Sequence

SETTLED = "settled"  # the median's confidence interval met the bound
CEILING = "ceiling"  # max_steps reached first
FIXED = "fixed"  # no rule: exactly the asked number of steps


def binomial_half_cdf(k: int, n: int) -> float:
    """P(Binomial(n, 1/2) <= k), exactly."""
    if k < 0:
        return 0.0
    return sum(math.comb(n, i) for i in range(min(k, n) + 1)) / 2**n


def median_ci_ranks(n: int, confidence: float) -> tuple[int, int, float] | None:
    """1-based ranks (l, u) of the order statistics bounding the median at >= `confidence`, and
    the exact coverage; None when n samples are too few for that confidence (n < 6 at 95 %)."""
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be between 0 and 1, got {confidence}")
    alpha_half = (1 - confidence) / 2
    best = None
    for l in range(1, n // 2 + 1):
        if binomial_half_cdf(l - 1, n) <= alpha_half:
            best = l  # the tightest l whose tail still fits
        else:
            break
    if best is None:
        return None
    return best, n + 1 - best, 1 - 2 * binomial_half_cdf(best - 1, n)


def median(samples: Sequence[float]) -> float:
    s = sorted(samples)
    n = len(s)
    if not n:
        raise ValueError("median of no samples")
    mid = n // 2
    return s[mid] if n % 2 else (s[mid - 1] + s[mid]) / 2


def median_ci(samples: Sequence[float], confidence: float) -> tuple[float, float] | None:
    """(low, high) bounding the median at `confidence`, or None when there are too few samples."""
    ranks = median_ci_ranks(len(samples), confidence)
    if ranks is None:
        return None
    s = sorted(samples)
    l, u, _ = ranks
    return s[l - 1], s[u - 1]


def ci_halfwidth(samples: Sequence[float], confidence: float) -> float | None:
    """The interval's farther end from the median, relative to the median (0.02 = ±2 %)."""
    ci = median_ci(samples, confidence)
    if ci is None:
        return None
    m = median(samples)
    return max(m - ci[0], ci[1] - m) / m


@dataclass(frozen=True)
class StopRule:
    min_steps: int
    max_steps: int | None  # None: exactly min_steps (no rule)
    confidence: float = 0.95
    max_halfwidth: float = 0.02

    def __post_init__(self):
        if self.min_steps < 1:
            raise ValueError(f"min_steps must be >= 1, got {self.min_steps}")
        if self.max_steps is not None and self.max_steps < self.min_steps:
            raise ValueError(f"max_steps {self.max_steps} < min_steps {self.min_steps}")
        if not 0 < self.confidence < 1 or self.max_halfwidth < 0:
            raise ValueError(f"confidence must be in (0, 1) and max_halfwidth >= 0, got "
                             f"{self.confidence}, {self.max_halfwidth}")

    @classmethod
    def fixed(cls, steps: int) -> StopRule:
        return cls(steps, None)

    def decide(self, samples: Sequence[float]) -> str | None:
        """SETTLED / CEILING / FIXED when the loop should stop after these samples, else None."""
        n = len(samples)
        if self.max_steps is None:
            return FIXED if n >= self.min_steps else None
        if n < self.min_steps:
            return None
        halfwidth = ci_halfwidth(samples, self.confidence)
        if halfwidth is not None and halfwidth <= self.max_halfwidth:
            return SETTLED
        if n >= self.max_steps:
            return CEILING
        return None

    def next_chunk(self, done: int, chunk: int) -> int:
        """How many steps to run before the next look: up to min_steps first, then `chunk`."""
        if done < self.min_steps:
            want = self.min_steps - done
        else:
            want = chunk
        if self.max_steps is not None:
            want = min(want, self.max_steps - done)
        return max(want, 0)


class StepClock:
    """Per-step durations in seconds; CUDA events on GPUs, perf_counter on CPU."""

    def __init__(self, device):
        self.cuda = getattr(device, "type", device) == "cuda"
        self._marks: list = []

    def start(self) -> None:
        self._marks = [self._mark()]

    def lap(self) -> None:
        self._marks.append(self._mark())

    def read(self) -> list[float]:
        """Durations between consecutive marks; synchronises with the device once."""
        marks, self._marks = self._marks, []
        if self.cuda:
            marks[-1].synchronize()
            return [a.elapsed_time(b) / 1e3 for a, b in zip(marks, marks[1:])]
        return [b - a for a, b in zip(marks, marks[1:])]

    def _mark(self):
        if self.cuda:
            import torch

            event = torch.cuda.Event(enable_timing=True)
            event.record()
            return event
        return time.perf_counter()


@dataclass
class TimedSteps:
    durations: list[float]  # seconds per step, combined over ranks (slowest rank per step)
    stop: str  # SETTLED | CEILING | FIXED
    confidence: float | None
    ci: tuple[float, float] | None

    def summary(self) -> dict:
        d = self.durations
        m = median(d)
        return {
            "step_times_s": list(d),
            "timed_steps": len(d),
            "stop_reason": self.stop,
            "step_time_min_s": min(d),
            "step_time_median_s": m,
            "step_time_max_s": max(d),
            "step_time_spread": max(d) / min(d),
            "step_time_ci_s": list(self.ci) if self.ci else None,
            "step_time_ci_confidence": self.confidence,
            "step_time_ci_halfwidth": (max(m - self.ci[0], self.ci[1] - m) / m) if self.ci else None,
        }


def time_steps(
    step: Callable[[int], None],
    rule: StopRule,
    clock: StepClock,
    combine: Callable[[list[float]], list[float]] = lambda d: d,
    chunk: int = 4,
    first_index: int = 0,
) -> TimedSteps:
    """Run `step(i)` for i = first_index, first_index+1, ... until `rule` says stop.

    `combine` turns this rank's durations of one chunk into the ones every rank uses (an
    all-reduce MAX in a process group); it must return the same list on every rank.
    """
    durations: list[float] = []
    i = first_index
    stop = None
    while stop is None:
        n = rule.next_chunk(len(durations), chunk)
        if n == 0:  # only reachable with a ceiling already met; decide() says so first
            stop = CEILING
            break
        clock.start()
        for _ in range(n):
            step(i)
            clock.lap()
            i += 1
        durations.extend(combine(clock.read()))
        stop = rule.decide(durations)
    ci = median_ci(durations, rule.confidence)
    return TimedSteps(durations, stop, rule.confidence if ci else None, ci)
