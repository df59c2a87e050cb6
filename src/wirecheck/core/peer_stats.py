"""The robust "below its peers" rule shared by the fleet figures and the pair schedule.

A value is named when it is below the reference median by more than `max_below_median` (a fraction
of the median) AND by more than `mad_k` scaled MADs of the reference. Scaled MAD = 1.4826 x the
median absolute deviation, which estimates the standard deviation of normal noise without letting
the outlier itself inflate it (Leys et al. 2013). The value under judgement is never part of its
own reference: a slow node cannot pull the median toward itself.

A fleet judges thousands of values, each against all the others: `leave_one_out` gives every value
the statistics of the others (median, scaled MAD, n) from one sort, in O(n log n) rather than a
list of n - 1 peers per value, and `below_reference` judges a value against such statistics alone,
so a verdict can keep them instead of every peer's value and still be judged again.
"""

from __future__ import annotations

import bisect
import statistics
from dataclasses import dataclass

MAD_SCALE = 1.4826
RULE = "peers"  # the rule a limit made from the node's own median is (wirecheck.core.verdict.RULES)


@dataclass(frozen=True)
class Below:
    value: float
    median: float
    scaled_mad: float
    below: float  # fraction of the median the value is under it (negative: above)
    named: bool
    n_reference: int

    def describe(self, fmt) -> str:
        side = f"{self.below * 100:.1f} % below" if self.below >= 0 else f"{-self.below * 100:.1f} % above"
        return f"{fmt(self.value)} is {side} the median {fmt(self.median)} of {self.n_reference} (scaled MAD {fmt(self.scaled_mad)})"


@dataclass(frozen=True)
class Reference:
    """What the rule needs of a reference: its median, its scaled MAD and how many values it has."""
    median: float
    scaled_mad: float
    n: int


def reference_of(values: list[float]) -> Reference:
    if not values:
        raise ValueError("below_median needs at least one reference value")
    median = statistics.median(values)
    return Reference(median, MAD_SCALE * statistics.median(abs(x - median) for x in values), len(values))


def below_reference(value: float, ref: Reference, max_below_median: float, mad_k: float) -> Below:
    gap = ref.median - value
    below = gap / ref.median if ref.median > 0 else 0.0
    named = gap > max_below_median * ref.median and gap > mad_k * ref.scaled_mad
    return Below(value, ref.median, ref.scaled_mad, below, named, ref.n)


def below_median(value: float, reference: list[float], max_below_median: float, mad_k: float) -> Below:
    return below_reference(value, reference_of(reference), max_below_median, mad_k)


def _median_without(ordered: list[float], k: int) -> float:
    """The median of the sorted list `ordered` with its k-th element taken out (as statistics.median)."""
    m = len(ordered) - 1

    def at(j: int) -> float:  # the j-th element of the list without k
        return ordered[j] if j < k else ordered[j + 1]

    if m % 2:
        return at(m // 2)
    return (at(m // 2 - 1) + at(m // 2)) / 2


def leave_one_out(values: list[float]) -> list[Reference]:
    """For each value, the Reference of all the others (the same numbers as reference_of on the list
    without it). Taking one value out of a sorted list moves its median to one of at most three
    values, so each distinct median needs one sorted list of deviations, from which the MAD without
    any one value is read by its rank: O(n log n) for the whole list."""
    n = len(values)
    if n < 2:
        raise ValueError("leave_one_out needs at least two values")
    order = sorted(range(n), key=values.__getitem__)
    ordered = [values[i] for i in order]
    rank = [0] * n
    for r, i in enumerate(order):
        rank[i] = r
    deviations: dict[float, list[float]] = {}
    out = []
    for i, x in enumerate(values):
        median = _median_without(ordered, rank[i])
        devs = deviations.get(median)
        if devs is None:
            devs = deviations[median] = sorted(abs(v - median) for v in ordered)
        # Any element equal to this one's deviation can be taken out: the rest is the same multiset.
        k = bisect.bisect_left(devs, abs(x - median))
        out.append(Reference(median, MAD_SCALE * _median_without(devs, k), n - 1))
    return out


def relative_spread(values: list[float]) -> float:
    """Scaled MAD over the median: a figure's robust relative noise (0 for fewer than two values),
    as `wirecheck calibrate` and the history rule read it from the runs themselves."""
    if len(values) < 2:
        return 0.0
    median = statistics.median(values)
    if median <= 0:
        return 0.0
    return MAD_SCALE * statistics.median(abs(v - median) for v in values) / median
