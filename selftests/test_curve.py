"""The size curve: sweeps, the per-size path choice, small-message latency and n½, and their checks."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import pytest

from types import SimpleNamespace

from wirecheck.checks.latency import half_peak_size_check, small_message_latency_check
from wirecheck.measure.curve import (
    EAGER,
    GRAPH,
    SweepSpec,
    choose_path,
    geometric_sizes,
    half_peak_size,
    parse_sweep,
    small_message_latency,
)
from wirecheck.thresholds.file import Limit

KiB, MiB, GiB = 2**10, 2**20, 2**30


@dataclass(frozen=True)
class P:
    bytes: int
    time_s: float
    busbw: float
    path: str = ""


def curve(rows) -> list[P]:
    """(size, time us, busbw GB/s[, path]) rows -> points."""
    return [P(r[0], r[1] * 1e-6, r[2] * 1e9, *r[3:]) for r in rows]


# nccl-tests 2.19.6 all_reduce on 2x H200 SXM (fixtures/reference/h200-sxm-2/nccl-tests.txt, out-of-place)
NCCL_TESTS_ALL_REDUCE = curve([(1 * MiB, 17.76, 59.04), (8 * MiB, 50.16, 167.23), (64 * MiB, 249.61, 268.85),
                               (512 * MiB, 1711.92, 313.61)])


# ---- sweeps ----------------------------------------------------------------------------------------


def test_geometric_sizes_follow_nccl_tests():
    assert geometric_sizes(8, 1 * GiB, 8) == tuple(8 * 8**k for k in range(10))
    assert geometric_sizes(1 * MiB, 1 * GiB, 8) == (MiB, 8 * MiB, 64 * MiB, 512 * MiB)  # the reference run's -b 1M -e 1G -f 8
    assert geometric_sizes(8, 100, 2) == (8, 16, 32, 64)  # stops below the end, as -e does
    with pytest.raises(ValueError, match="whole step >= 2"):
        geometric_sizes(8, 64, 1)


def test_parse_sweep_for_the_command_line():
    spec = parse_sweep("8B:1GiB:2")
    assert spec == SweepSpec(8, GiB, 2) and len(spec.sizes) == 28
    assert parse_sweep("64 KiB:4 MiB:8x").sizes == (64 * KiB, 512 * KiB, 4 * MiB)
    assert spec.nccl_tests_args() == ["-b", "8", "-e", str(GiB), "-f", "2"]
    for bad, fragment in (("8B:1GiB", "FROM:TO:STEP"), ("8:1GiB:2", "no unit"), ("8B:1GiB:1.5", "whole factor"),
                          ("8B:1000MiB:2", "TO is not FROM x STEP^k")):
        with pytest.raises(ValueError, match=re.escape(fragment)):
            parse_sweep(bad)


# ---- the path per size -----------------------------------------------------------------------------


@pytest.mark.parametrize(("eager", "graph", "expected"), [
    (45e-6, 19e-6, (GRAPH, 19e-6)),       # launch-bound: the replay wins
    (52.5e-6, 62.9e-6, (EAGER, 52.5e-6)),  # 2x H200 at 8 MiB: the graph was slower
    (45e-6, None, (EAGER, 45e-6)),         # not timed
    (45e-6, 45e-6, (EAGER, 45e-6)),        # a tie keeps the plain path
    (45e-6, math.nan, (EAGER, 45e-6)),
    (45e-6, 0.0, (EAGER, 45e-6)),          # a zero time is a broken reading, never a win
])
def test_choose_path(eager, graph, expected):
    assert choose_path(eager, graph) == expected


# ---- latency ---------------------------------------------------------------------------------------


SMALL = curve([(8, 19.2, 0.0, GRAPH), (512, 19.6, 0.03, GRAPH), (32 * KiB, 18.8, 1.7, GRAPH),
               (64 * KiB, 30.0, 2.2, EAGER), (1 * MiB, 27.3, 38.4, GRAPH)])


def test_small_message_latency_is_the_median_up_to_the_bound():
    lat = small_message_latency(SMALL, 64 * KiB)
    assert lat.sizes == (8, 512, 32 * KiB, 64 * KiB)  # 1 MiB is above the bound
    assert lat.time_s == pytest.approx((19.2e-6 + 19.6e-6) / 2)  # one slow size moves the median only a little
    assert lat.paths == (GRAPH, GRAPH, GRAPH, EAGER)
    assert small_message_latency(SMALL, 4) is None


def _limit(max_, kind, path="thresholds.yaml: collectives.latency.ceilings.nvswitch.all_reduce.2"):
    return Limit(min=None, max=max_, source="guess: test", yaml_path=path, kind=kind)


def _thresholds(limit, up_to=64 * KiB, fraction=0.5):
    """Only what the curve checks look up: the rule and the ceiling for any class/op/count."""
    return SimpleNamespace(latency=SimpleNamespace(up_to=up_to), half_peak=SimpleNamespace(fraction=fraction),
                           latency_rule=lambda *a: (limit, ""), half_peak_rule=lambda *a: (limit, ""))


def _plain(points) -> list:
    return [{"bytes": p.bytes, "time_s": p.time_s, "busbw": p.busbw, "path": p.path} for p in points]


def latency_check(points, limit, up_to, op, where):
    return small_message_latency_check(_thresholds(limit, up_to=up_to), op=op, placement=where, placement_class="nvswitch",
                                       n_gpus=2, simulated=False, curve=_plain(points))


def half_peak_check(points, limit, fraction, op, where):
    return half_peak_size_check(_thresholds(limit, fraction=fraction), op=op, placement=where, placement_class="nvswitch",
                                n_gpus=2, simulated=False, curve=_plain(points))


def test_latency_check_passes_and_fails_by_name():
    ok = latency_check(SMALL, _limit(30e-6, "time"), 64 * KiB, "all_reduce", "nvswitch-2gpu-0.1")
    assert ok.outcome == "pass" and ok.measured == pytest.approx(19.4) and ok.unit == "µs"
    slow = latency_check(SMALL, _limit(15e-6, "time"), 64 * KiB, "all_reduce", "nvswitch-2gpu-0.1")
    assert slow.outcome == "fail"
    message = slow.message
    assert message.startswith("all_reduce small-message latency (median of 4 size(s) from 8 B to 64 KiB, eager/graph path:")
    assert "on nvswitch-2gpu-0.1: measured 19.4 µs > ceiling 15 µs" in message
    assert "8 B 19.2 µs graph" in message and "64 KiB 30 µs eager" in message  # every size and its path
    assert "collectives.latency.ceilings.nvswitch.all_reduce.2" in slow.yaml_path and slow.source == "guess: test"
    assert "source" not in message and message.endswith("above (measured limit)")  # the line, not the provenance
    assert tuple(slow.details["sizes"]) == (8, 512, 32 * KiB, 64 * KiB)


def test_latency_check_says_why_it_does_not_judge():
    none = latency_check(SMALL, None, 64 * KiB, "all_reduce", "nvl_group-3gpu-0.1.2")
    assert none.outcome == "skip" and "no small-message latency ceiling" in none.message
    empty = latency_check(SMALL[-1:], _limit(30e-6, "time"), 64 * KiB, "all_reduce", "x")
    assert empty.outcome == "skip" and "no size up to 64 KiB was measured" in empty.message


# ---- n½ --------------------------------------------------------------------------------------------


def test_half_peak_of_the_reference_nccl_tests_curve():
    hp = half_peak_size(NCCL_TESTS_ALL_REDUCE)
    assert hp.peak_busbw == pytest.approx(313.61e9) and hp.peak_size == 512 * MiB
    assert hp.first_size == 8 * MiB and hp.below_size == 1 * MiB  # 167.2 >= 156.8 > 59.0
    # linear in log2(size) between 1 MiB (59.04) and 8 MiB (167.23)
    t = (313.61 / 2 - 59.04) / (167.23 - 59.04)
    assert hp.size == pytest.approx(2 ** (20 + 3 * t))
    assert 6 * MiB < hp.size < 8 * MiB and hp.sweep_max == 512 * MiB


def test_half_peak_does_not_jump_with_the_sweep_step():
    # a smooth curve busbw = peak * s / (s + n_half): n½ is exactly n_half
    n_half, peak = 8 * MiB, 300e9
    fine = [P(s, 0, peak * s / (s + n_half)) for s in geometric_sizes(8, 4 * GiB, 2)]
    coarse = [P(s, 0, peak * s / (s + n_half)) for s in geometric_sizes(8, GiB, 8)]
    assert half_peak_size(fine).size == pytest.approx(n_half, rel=0.05)
    assert half_peak_size(coarse).size == pytest.approx(n_half, rel=0.25)  # the first size above is 16 MiB


def test_half_peak_takes_the_first_crossing_and_edge_cases():
    dip = curve([(1 * MiB, 1, 10), (2 * MiB, 1, 60), (4 * MiB, 1, 40), (8 * MiB, 1, 100)])
    assert half_peak_size(dip).first_size == 2 * MiB  # the later dip does not move it
    early = curve([(8, 1, 60), (16, 1, 100)])
    hp = half_peak_size(early)
    assert hp.size == 8 and hp.at_or_below_first_size
    assert half_peak_size([]) is None and half_peak_size(curve([(8, 1, 0.0)])) is None
    assert half_peak_size(NCCL_TESTS_ALL_REDUCE, 0.9).first_size == 512 * MiB
    with pytest.raises(ValueError, match="fraction"):
        half_peak_size(NCCL_TESTS_ALL_REDUCE, 1.5)


def test_half_peak_check_passes_and_fails_by_name():
    path = "thresholds.yaml: collectives.half_peak.ceilings.nvswitch.all_reduce.2"
    ok = half_peak_check(NCCL_TESTS_ALL_REDUCE, _limit(32 * MiB, "size", path), 0.5, "all_reduce", "nvswitch-2gpu-0.1")
    assert ok.outcome == "pass" and ok.measured == pytest.approx(half_peak_size(NCCL_TESTS_ALL_REDUCE).size)
    late = half_peak_check(NCCL_TESTS_ALL_REDUCE, _limit(4 * MiB, "size", path), 0.5, "all_reduce", "nvswitch-2gpu-0.1")
    assert late.outcome == "fail"
    message = late.message
    assert ("all_reduce n½ (busbw first reaches 50% of the peak 313.6 GB/s at 512 MiB between 1 MiB and 8 MiB) "
            "on nvswitch-2gpu-0.1: measured 6.5 MiB") in message
    assert "> ceiling 4 MiB, " in message and "collectives.half_peak.ceilings.nvswitch.all_reduce.2" in late.yaml_path
    assert half_peak_check(NCCL_TESTS_ALL_REDUCE, None, 0.5, "all_reduce", "x").message.endswith("collectives.half_peak")


def test_latency_check_does_not_judge_eager_times_against_graph_ceilings():
    """Where no replay could be timed (expandable_segments with NCCL < 2.29), the eager launch cost
    would fail a healthy node: the check says so instead, naming the cause. A faster eager path
    (graph timed, eager won) is still judged."""
    note = "expandable_segments is on and NCCL 2.28.9 < 2.29 faults on captured collectives: eager calls only"
    eager_only = [dict(p, path="eager", graph_note=note) for p in _plain(SMALL)]
    v = small_message_latency_check(_thresholds(_limit(15e-6, "time")), op="all_reduce", placement="nvswitch-2gpu-0.1",
                                    placement_class="nvswitch", n_gpus=2, simulated=False, curve=eager_only)
    assert v.outcome == "skip" and "CUDA-graph replay times" in v.message and note in v.message
    judged = [dict(p, path="eager", graph_note=None) for p in _plain(SMALL)]
    v = small_message_latency_check(_thresholds(_limit(15e-6, "time")), op="all_reduce", placement="nvswitch-2gpu-0.1",
                                    placement_class="nvswitch", n_gpus=2, simulated=False, curve=judged)
    assert v.outcome == "fail"
