"""Timing training steps until the median settles: the interval, the stop rule, the loop."""

from __future__ import annotations

import math
import random

import pytest

from wirecheck.training.timing import (
    CEILING,
    FIXED,
    SETTLED,
    StopRule,
    binomial_half_cdf,
    ci_halfwidth,
    median,
    median_ci,
    median_ci_ranks,
    time_steps,
)


# ---- the distribution-free interval -----------------------------------------------------------


def test_binomial_tail_exact():
    assert binomial_half_cdf(0, 6) == 1 / 64
    assert binomial_half_cdf(1, 10) == 11 / 1024
    assert binomial_half_cdf(10, 10) == 1.0 and binomial_half_cdf(-1, 10) == 0.0


@pytest.mark.parametrize("n, ranks, coverage", [
    (6, (1, 6), 1 - 2 / 64),             # the fewest samples with a 95 % interval: [min, max]
    (8, (1, 8), 1 - 2 / 256),
    (9, (2, 8), 1 - 2 * 10 / 512),
    (10, (2, 9), 1 - 2 * 11 / 1024),     # textbook: x(2)..x(9), 97.85 %
    (20, (6, 15), 1 - 2 * 21700 / 2**20),  # textbook: x(6)..x(15), 95.86 %
])
def test_median_interval_ranks_match_the_tables(n, ranks, coverage):
    l, u, got = median_ci_ranks(n, 0.95)
    assert (l, u) == ranks
    assert got == pytest.approx(coverage) and got >= 0.95


def test_too_few_samples_have_no_interval():
    assert median_ci_ranks(5, 0.95) is None
    assert median_ci(list(range(5)), 0.95) is None and ci_halfwidth([1.0] * 5, 0.95) is None
    assert median_ci_ranks(5, 0.90) is not None  # a lower confidence needs fewer


def test_interval_reads_the_order_statistics():
    samples = [7.0, 3.0, 9.0, 1.0, 5.0, 10.0, 2.0, 8.0, 4.0, 6.0]
    assert median(samples) == 5.5
    assert median_ci(samples, 0.95) == (2.0, 9.0)
    assert ci_halfwidth(samples, 0.95) == pytest.approx(3.5 / 5.5)
    assert ci_halfwidth([0.1] * 8, 0.95) == 0.0


def test_interval_covers_the_true_median_of_a_skewed_distribution():
    """Exponential step times (median ln 2): the interval holds it in >= 95 % of samples."""
    rng = random.Random(7)
    trials, n, hits = 3000, 15, 0
    for _ in range(trials):
        lo, hi = median_ci([rng.expovariate(1.0) for _ in range(n)], 0.95)
        hits += lo <= math.log(2) <= hi
    _, _, coverage = median_ci_ranks(n, 0.95)
    assert 0.95 <= hits / trials <= coverage + 0.015


# ---- the stop rule ------------------------------------------------------------------------------


def test_rule_settles_when_the_median_is_tight():
    rule = StopRule(8, 30, 0.95, 0.02)
    assert rule.decide([0.1] * 7) is None  # below min_steps, whatever the spread
    assert rule.decide([0.1] * 8) == SETTLED
    assert rule.decide([0.1, 0.101, 0.099, 0.1, 0.1, 0.1005, 0.0995, 0.1]) == SETTLED


def test_rule_keeps_going_then_hits_the_ceiling():
    rule = StopRule(8, 12, 0.95, 0.02)
    noisy = [0.1, 0.2] * 6
    assert rule.decide(noisy[:8]) is None and rule.decide(noisy[:11]) is None
    assert rule.decide(noisy) == CEILING


def test_fixed_rule_ignores_the_spread():
    rule = StopRule.fixed(3)
    assert rule.decide([1.0, 5.0]) is None and rule.decide([1.0, 5.0, 9.0]) == FIXED


@pytest.mark.parametrize("args", [(0, 5), (8, 7), (8, 30, 1.0, 0.02), (8, 30, 0.95, -0.1)])
def test_rule_refuses_nonsense(args):
    with pytest.raises(ValueError):
        StopRule(*args)


# ---- the loop, with a scripted clock --------------------------------------------------------------


class ScriptedClock:
    """Stands in for StepClock: each lap takes the next scripted duration."""

    def __init__(self, durations):
        self.durations = list(durations)
        self.laps = 0

    def start(self):
        self._chunk = []

    def lap(self):
        self._chunk.append(self.durations[self.laps])
        self.laps += 1

    def read(self):
        return self._chunk


def _run(rule, durations, combine=lambda d: d, chunk=4):
    clock, calls = ScriptedClock(durations), []
    result = time_steps(calls.append, rule, clock, combine, chunk=chunk, first_index=3)
    return result, calls


def test_loop_stops_at_min_steps_when_steps_are_steady():
    result, calls = _run(StopRule(8, 30, 0.95, 0.02), [0.1] * 40)
    assert result.stop == SETTLED and len(result.durations) == 8
    assert calls == list(range(3, 11))  # step indices continue after the warm-up
    summary = result.summary()
    assert summary["step_time_ci_s"] == [0.1, 0.1] and summary["step_time_ci_halfwidth"] == 0.0
    assert summary["timed_steps"] == 8 and summary["stop_reason"] == SETTLED


def test_loop_runs_until_the_median_settles():
    # 8 noisy steps, then steady ones: the interval tightens once the steady ones dominate
    durations = [0.1, 0.3, 0.05, 0.4, 0.1, 0.35, 0.02, 0.5] + [0.1] * 40
    result, calls = _run(StopRule(8, 40, 0.95, 0.02), durations)
    assert result.stop == SETTLED and 8 < len(result.durations) < 40
    assert len(result.durations) % 4 == 0  # looked at after whole chunks
    assert ci_halfwidth(result.durations, 0.95) <= 0.02
    assert ci_halfwidth(result.durations[:-4], 0.95) > 0.02  # one chunk earlier it had not settled


def test_loop_stops_at_the_ceiling_even_mid_chunk():
    result, calls = _run(StopRule(8, 11, 0.95, 0.02), [0.1, 0.2] * 20)
    assert result.stop == CEILING and len(result.durations) == 11 and len(calls) == 11
    summary = result.summary()
    assert summary["step_time_min_s"] == 0.1 and summary["step_time_max_s"] == 0.2
    lo, hi = summary["step_time_ci_s"]
    assert lo <= summary["step_time_median_s"] <= hi


def test_loop_decides_on_the_combined_durations():
    """Ranks decide on the slowest rank's times: a steady rank beside a noisy one keeps going."""
    noisy = iter([0.1, 0.3] * 30)
    result, _ = _run(StopRule(8, 16, 0.95, 0.02), [0.1] * 40,
                     combine=lambda d: [max(x, next(noisy)) for x in d])
    assert result.stop == CEILING and max(result.durations) == 0.3


def test_fixed_loop_runs_exactly_the_asked_steps():
    result, calls = _run(StopRule.fixed(2), [0.1, 0.2, 0.3])
    assert result.stop == FIXED and result.durations == [0.1, 0.2] and len(calls) == 2
    assert result.ci is None and result.summary()["step_time_ci_s"] is None
