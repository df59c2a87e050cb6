"""Slow loss in a series of runs: the drift rule's two candidate tests, pure functions of the values.

The median rule (history) compares a run with the median of the last runs; a GPU that loses a little
each night drags that median along and is never more than a few nights' loss below it. A drift test
looks at the whole series instead:

- `cusum`: Page's one-sided CUSUM on the robust-standardized series: each run's shortfall against the
  reference (the median of the oldest `baseline` runs), in units of the reference's noise, less an
  allowance `k`, summed while it stays positive; an alarm when the sum passes `h`. Where the sum last
  left zero is where the change began, so the finding names those runs.
- `slope`: the Theil-Sen slope (the median of the pairwise slopes: one wild run moves it little) with
  the Mann-Kendall test of its sign; an alarm when the series falls with z below -`z`.

scripts/bench/sensitivity.py replays recorded runs through both and docs/records.md says which the
drift rule uses and why. Values are oldest first; higher is better (a loss is a fall).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from wirecheck.core.peer_stats import relative_spread


@dataclass(frozen=True)
class Drift:
    alarm: bool  # the test says the series fell
    began: int | None  # index of the first run of the change (None: no change found)
    loss: float  # how far the latest level lies below the reference, a fraction (negative: above it)
    statistic: float  # the CUSUM in noise units, or the Mann-Kendall z
    reference: float  # the level before the change
    sigma: float  # the relative noise the series was standardized by
    per_run: float  # the fall per run since the change began, a fraction of the reference


def theil_sen(values: list[float]) -> tuple[float, float]:
    """(slope per run, intercept at index 0): the median of the pairwise slopes and the median of
    value - slope x index."""
    n = len(values)
    if n < 2:
        return 0.0, values[0] if values else 0.0
    slope = statistics.median((values[j] - values[i]) / (j - i) for i in range(n) for j in range(i + 1, n))
    return slope, statistics.median(v - slope * i for i, v in enumerate(values))


def detrended_noise(values: list[float]) -> float:
    """The relative noise of `values` about their Theil-Sen line: 1.4826 x the MAD of the residuals over the
    median value. A steady fall does not count as noise (a ramp's values spread, its residuals do not), and a
    series of 30 runs measures it far better than the 8 of a reference: a floor for the CUSUM's noise, so
    that a reference that happened to be quiet does not make a noisy figure look like it fell."""
    if len(values) < 3:
        return 0.0
    per_run, intercept = theil_sen(values)
    residuals = [v - (intercept + per_run * i) for i, v in enumerate(values)]
    level = statistics.median(values)
    if level <= 0:
        return 0.0
    return 1.4826 * statistics.median(abs(r) for r in residuals) / level


def _level_since(values: list[float], start: int) -> tuple[float, float]:
    """(the level at the last run, the slope per run) of values[start:] by Theil-Sen: for a step the
    median of the runs since, for a ramp where the ramp has reached."""
    tail = values[start:]
    if len(tail) < 3:
        return statistics.median(tail), 0.0
    slope, intercept = theil_sen(tail)
    return intercept + slope * (len(tail) - 1), slope


def noise(values: list[float]) -> float:
    """The relative noise of `values`: the larger of their scaled MAD / median (robust) and standard deviation
    / mean (which a few values estimate less badly, where the MAD of eight can be near zero)."""
    if len(values) < 2:
        return 0.0
    mean = math.fsum(values) / len(values)
    sd = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (len(values) - 1)) / mean if mean > 0 else 0.0
    return max(relative_spread(values), sd)


def cusum(values: list[float], baseline: int, sigma_floor: float = 0.0, k: float = 0.5, h: float = 5.0) -> Drift:
    """Page's lower CUSUM of `values` against the median of its first `baseline` runs, standardized by
    max(their noise, `sigma_floor`)."""
    if baseline < 2 or len(values) <= baseline:
        raise ValueError(f"cusum needs more than `baseline` ({baseline}) runs, got {len(values)}")
    ref_values = values[:baseline]
    reference = statistics.median(ref_values)
    sigma = max(noise(ref_values), sigma_floor)
    if reference <= 0 or sigma <= 0:
        return Drift(False, None, 0.0, 0.0, reference, sigma, 0.0)
    total, began = 0.0, None
    for t in range(baseline, len(values)):
        shortfall = (1.0 - values[t] / reference) / sigma
        after = max(0.0, total + shortfall - k)
        if after > 0 and total == 0:
            began = t
        elif after == 0:
            began = None
        total = after
    alarm = total > h
    if began is None:
        return Drift(False, None, 1.0 - values[-1] / reference, total, reference, sigma, 0.0)
    level, slope = _level_since(values, began)
    return Drift(alarm, began, 1.0 - level / reference, total, reference, sigma, -slope / reference)


def mann_kendall(values: list[float]) -> float:
    """The Mann-Kendall z of `values` (negative: falling), with the continuity correction; ties count 0."""
    n = len(values)
    if n < 3:
        return 0.0
    s = sum((values[j] > values[i]) - (values[j] < values[i]) for i in range(n) for j in range(i + 1, n))
    var = n * (n - 1) * (2 * n + 5) / 18.0
    if s == 0:
        return 0.0
    return (s - 1) / math.sqrt(var) if s > 0 else (s + 1) / math.sqrt(var)


def slope(values: list[float], sigma_floor: float = 0.0, z: float = 2.33) -> Drift:
    """The Theil-Sen slope of `values` with the Mann-Kendall test of its sign: an alarm when it falls with
    z < -`z`; the change is dated from the first run of the series (the slope is over all of it)."""
    if len(values) < 3:
        raise ValueError(f"a slope needs at least 3 runs, got {len(values)}")
    per_run, intercept = theil_sen(values)
    reference = intercept if intercept > 0 else statistics.median(values)
    statistic = mann_kendall(values)
    level = intercept + per_run * (len(values) - 1)
    sigma = max(noise(values), sigma_floor)
    alarm = statistic < -z and per_run < 0
    return Drift(alarm, 0 if alarm else None, 1.0 - level / reference, statistic, reference, sigma,
                 -per_run / reference)
