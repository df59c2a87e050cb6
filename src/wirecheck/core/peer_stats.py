"""The robust "below its peers" rule shared by the fleet figures and the pair schedule.

A value is named when it is below the reference median by more than `max_below_median` (a fraction
of the median) AND by more than `mad_k` scaled MADs of the reference. Scaled MAD = 1.4826 x the
median absolute deviation, which estimates the standard deviation of normal noise without letting
the outlier itself inflate it (Leys et al. 2013). The value under judgement is never part of its
own reference: a slow node cannot pull the median toward itself.
"""

from __future__ import annotations

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


def below_median(value: float, reference: list[float], max_below_median: float, mad_k: float) -> Below:
    if not reference:
        raise ValueError("below_median needs at least one reference value")
    median = statistics.median(reference)
    scaled_mad = MAD_SCALE * statistics.median(abs(x - median) for x in reference)
    gap = median - value
    below = gap / median if median > 0 else 0.0
    named = gap > max_below_median * median and gap > mad_k * scaled_mad
    return Below(value, median, scaled_mad, below, named, len(reference))


def relative_spread(values: list[float]) -> float:
    """Scaled MAD over the median: a figure's robust relative noise (0 for fewer than two values),
    as `wirecheck calibrate` and the history rule read it from the runs themselves."""
    if len(values) < 2:
        return 0.0
    median = statistics.median(values)
    if median <= 0:
        return 0.0
    return MAD_SCALE * statistics.median(abs(v - median) for v in values) / median
