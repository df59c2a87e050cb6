"""How small a loss a rule catches (its resolution) and how often it fails a clean run (its false alarms),
from the measured noise of the figure it judges.

A rule holds a figure to a bound. Slowed by a loss `s` (the figure times 1 - s), a reading is caught when it
falls below the bound. Every clean reading therefore has a critical loss: the smallest `s` that makes the
rule fail it, 1 - bound / reading (at or below 0 the rule already fails the clean reading: a false alarm).
Over many clean readings (the recorded runs, resampled) the rule's resolution is the loss it catches in
`CATCH` of them, the 95th percentile of the critical losses, and its false-alarm rate the share at or below
0. A rule that fails more than `MAX_FALSE` of clean readings cries wolf whatever loss it catches; one whose
resolution is coarser than `COARSE` says so rather than pretending to guard against smaller losses.

`of_normal` is the same for one bound and a noise given as a standard deviation (a history verdict: the
noise its own runs measured), in closed form. No torch, no numpy: plain Python, cheap enough for a verdict.
"""

from __future__ import annotations

import functools
import math
import random
import statistics
from dataclasses import dataclass
from typing import Iterable, Sequence

CATCH = 0.95  # a rule "catches" a loss it fails in 95 % of runs
MAX_FALSE = 0.01  # and may fail under 1 % of clean runs
COARSE = 0.10  # a rule that cannot see a 10 % loss says so
_Z = statistics.NormalDist()


@dataclass(frozen=True)
class Resolution:
    """The smallest loss a rule catches in CATCH of runs, and the share of clean runs it fails."""

    step: float  # a fraction: 0.021 is a 2.1 % loss
    false_alarm: float  # a fraction of clean runs
    how: str  # what it rests on: "4000 readings resampled from 12 clean runs", "normal noise 0.45 %"

    @property
    def cries_wolf(self) -> bool:
        return self.false_alarm >= MAX_FALSE

    @property
    def coarse(self) -> bool:
        return self.step > COARSE

    def words(self) -> str:
        """What an operator reads beside a bound: the loss it catches and its false alarms, or why not."""
        alarms = f"false alarms {percent(self.false_alarm)} of clean runs"
        if self.cries_wolf:
            return (f"no resolution: it fails {percent(self.false_alarm)} of clean runs (over the "
                    f"{MAX_FALSE * 100:g} % a rule may), {self.how}")
        if self.step >= 1.0:
            return f"no resolution: too noisy to judge in over {(1 - CATCH) * 100:g} % of its runs ({self.how})"
        caught = f"catches a loss of {percent(self.step)} in {CATCH * 100:g} % of runs"
        if self.coarse:
            return (f"coarse: it {caught}, worse than {COARSE * 100:g} %: a smaller loss passes it ({alarms}; "
                    f"{self.how})")
        return f"{caught} ({alarms}; {self.how})"

    def short(self) -> str:
        """For a table cell: "2.1 %", "> 10 % (13.6 %)", "cries wolf (2.3 %)"."""
        if self.cries_wolf:
            return f"cries wolf ({percent(self.false_alarm)} false)"
        if self.step >= 1.0:  # over 5 % of its histories too noisy to judge: no loss is caught in 95 % of runs
            return "none: too noisy"
        if self.coarse:
            return f"> {COARSE * 100:g} % ({percent(self.step)})"
        return percent(self.step)

    def as_dict(self) -> dict:
        return {"step": self.step, "false_alarm": self.false_alarm, "how": self.how,
                "coarse": self.coarse, "cries_wolf": self.cries_wolf}

    @classmethod
    def from_dict(cls, d: dict | None) -> "Resolution | None":
        if not isinstance(d, dict) or not isinstance(d.get("step"), (int, float)):
            return None
        return cls(float(d["step"]), float(d.get("false_alarm") or 0.0), str(d.get("how") or ""))


def percent(fraction: float) -> str:
    value = fraction * 100
    return f"{value:.2f} %" if abs(value) < 1 else f"{value:.1f} %"


def quantile(values: Sequence[float], q: float) -> float:
    """The q-quantile of `values` by linear interpolation between order statistics (numpy's default)."""
    ordered = sorted(values)
    if not ordered:
        raise ValueError("quantile of no values")
    pos = q * (len(ordered) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def from_critical(losses: Iterable[float], how: str) -> Resolution:
    """A rule's resolution from the critical loss of each (resampled) clean reading: the loss that makes the
    rule fail it (at or below 0: it fails it clean; +inf: no loss would, a rule that cannot fail it)."""
    losses = list(losses)
    if not losses:
        raise ValueError("a resolution needs at least one reading")
    false = sum(1 for s in losses if s <= 0) / len(losses)
    step = quantile([min(s, 1.0) for s in losses], CATCH)
    return Resolution(max(step, 0.0), false, how)


def critical_loss(value: float, bound: float) -> float:
    """The loss that takes `value` below the floor `bound`: 1 - bound / value (<= 0: below it already)."""
    return 1.0 - bound / value if value > 0 else 0.0


def of_bound(values: Sequence[float], bound: float, within: Sequence[float] = (), draws: int = 4000,
             seed: int = 0) -> Resolution:
    """A fixed floor's resolution over clean readings `values`, resampled `draws` times with replacement, each
    jittered by the figure's own within-run noise (a relative standard deviation drawn from `within`), so that
    a handful of runs gives a distribution and not only its few values."""
    if not values:
        raise ValueError("a floor's resolution needs clean readings")
    rng = random.Random(seed)
    noise = [w for w in within if w and w > 0]
    losses = []
    for _ in range(draws):
        value = rng.choice(values)
        if noise:
            value *= 1.0 + rng.gauss(0.0, rng.choice(noise))
        losses.append(critical_loss(value, bound))
    return from_critical(losses, f"{draws} readings resampled from {len(values)} clean runs")


def of_normal(margin: float, sigma: float, how: str = "") -> Resolution:
    """The resolution of a floor `margin` (a fraction) below a figure's expected level when its runs move with
    a relative standard deviation `sigma`: it catches 1 - (1 - margin) / (1 + z95 x sigma) and fails
    Phi(-margin / sigma) of clean runs."""
    if sigma <= 0:
        return Resolution(max(margin, 0.0), 0.0 if margin > 0 else 1.0, how or "no measured noise")
    step = 1.0 - (1.0 - margin) / (1.0 + _Z.inv_cdf(CATCH) * sigma)
    false = _Z.cdf(-margin / sigma)
    return Resolution(max(step, 0.0), false, how or f"normal noise {percent(sigma)}")


def within_of(spread: float | None, calls: int | None) -> float | None:
    """A figure's relative standard error within its run, from the spread of its repeats ((p90 - p10) /
    median of the per-call times: 2.563 standard deviations for normal noise) and their number: the median
    of n calls moves by 1.2533 x sd / sqrt(n). None where either is unknown."""
    if not spread or not calls or calls < 2 or spread <= 0:
        return None
    return 1.2533 * (spread / 2.563) / math.sqrt(calls)


def _betacf(a: float, b: float, x: float) -> float:
    """The continued fraction of the regularized incomplete beta function (Lentz's method)."""
    tiny, qab, qap, qam = 1e-300, a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        m2 = 2 * m
        for aa in (m * (b - m) * x / ((qam + m2) * (a + m2)), -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))):
            d = 1.0 + aa * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + aa / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-12:
            break
    return h


def _beta_inc(a: float, b: float, x: float) -> float:
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1) / (a + b + 2):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1 - x) / b


def student_t_cdf(t: float, df: float) -> float:
    tail = 0.5 * _beta_inc(df / 2, 0.5, df / (df + t * t))
    return 1.0 - tail if t > 0 else tail


def student_t_quantile(p: float, df: float) -> float:
    """The p-quantile of Student's t with `df` degrees of freedom (bisection on its CDF; no scipy here)."""
    if not 0 < p < 1 or df <= 0:
        raise ValueError(f"student_t_quantile needs 0 < p < 1 and df > 0, got p={p}, df={df}")
    lo, hi = -1e3, 1e3
    for _ in range(200):
        mid = (lo + hi) / 2
        if student_t_cdf(mid, df) < p:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


@functools.lru_cache(maxsize=256)
def prediction_factor(n: int, false_alarm: float) -> float:
    """How many standard deviations (as measured from `n` runs) a new run may fall below their mean before
    it is below a one-sided prediction bound at `false_alarm`: t(1 - false_alarm, n - 1) x sqrt(1 + 1/n).
    Few runs measure the noise poorly, so the bound widens: 8.0 for 3 runs at 1 %, 3.0 for 10."""
    if n < 2:
        raise ValueError("a prediction bound needs at least two runs")
    return student_t_quantile(1.0 - false_alarm, n - 1) * math.sqrt(1.0 + 1.0 / n)
