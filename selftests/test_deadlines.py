"""Per-call deadlines from the work: expected time at the floor x safety factor, clamped."""

from __future__ import annotations

from pathlib import Path

import pytest

from wirecheck.workers.deadlines import Deadline, DeadlineRule, collective_deadline, expected_collective_s
from wirecheck.node.placement import Placement
from wirecheck.thresholds.file import load_thresholds

RULE = DeadlineRule(minimum_s=10.0, safety_factor=10.0, source="test", yaml_path="thresholds.yaml: workers.deadlines.hardware")
GB, MiB, GiB = 1e9, 2**20, 2**30


def test_expected_time_follows_busbw():
    # 25 all_reduce calls of 1 GiB on 2 ranks (bus factor 1) at 25 GB/s busbw.
    assert expected_collective_s(GiB, 1.0, 25, 25 * GB) == pytest.approx(25 * GiB / (25 * GB))
    with pytest.raises(ValueError, match="positive"):
        expected_collective_s(GiB, 1.0, 25, 0)


def test_small_call_gets_the_minimum_and_says_why():
    d = collective_deadline(RULE, 120, "all_gather", MiB, 0.5, 25, 238 * GB, "nvswitch floor")
    assert d.seconds == 10.0
    assert d.note.startswith("the minimum (thresholds.yaml: workers.deadlines.hardware); 25 x all_gather at 1 MiB "
                             "should take ")
    assert "at the nvswitch floor 238" in d.note


def test_large_call_on_a_slow_wire_scales():
    d = collective_deadline(RULE, 120, "all_reduce", GiB, 1.0, 25, 24.8 * GB)
    assert d.seconds == pytest.approx(10 * 25 * GiB / (24.8 * GB))
    assert 10 < d.seconds < 120 and d.note.startswith("10 x expected: ")


def test_the_ceiling_wins():
    assert collective_deadline(RULE, 120, "all_reduce", GiB, 1.0, 25, 1 * GB).seconds == 120
    # A ceiling below the minimum (a lowered timeout) wins too, and the note names it, not the minimum.
    lowered = collective_deadline(RULE, 8, "all_reduce", MiB, 1.0, 7, 295 * GB)
    assert lowered.seconds == 8 and lowered.note.startswith("the ceiling, the section's timeout, at or below the minimum")


def test_no_floor_means_the_ceiling():
    d = collective_deadline(RULE, 120, "broadcast", GiB, 1.0, 25, None)
    assert d.seconds == 120 and "no busbw floor" in d.note


def test_deadline_must_be_positive():
    with pytest.raises(ValueError, match="positive"):
        Deadline(0, "zero")


def test_pool_uses_the_class_floor_or_the_slowest_one():
    from wirecheck.measure.sweep import floor_deadlines
    from wirecheck.workers.pool import WorkerPool

    th = load_thresholds(Path(__file__).resolve().parents[1] / "thresholds.yaml")
    pool = WorkerPool([], backend="nccl", simulated=False, timeout_s=120, deadline=floor_deadlines(th, False))
    nvswitch = Placement(klass="nvswitch", gpus=(0, 1), env={})
    small = pool.collective_deadline(nvswitch, "all_reduce", MiB, 25)
    assert small.seconds == 10.0 and "nvswitch floor 295" in small.note
    forced = Placement(klass="forced_pcie", gpus=(0, 1), env={"NCCL_P2P_DISABLE": "1"})
    big = pool.collective_deadline(forced, "all_reduce", GiB, 25)
    assert big.seconds == pytest.approx(10 * 25 * GiB / (24.8 * GB))
    # nvl_pair has no broadcast floor: the slowest broadcast floor in the file stands in.
    pair = Placement(klass="nvl_pair", gpus=(0, 1), env={})
    slowest = th.slowest_busbw_floor("broadcast", False)
    d = pool.collective_deadline(pair, "broadcast", GiB, 25)
    assert d.seconds == pytest.approx(min(120, 10 * 25 * GiB / slowest.min)) and "slowest floor" in d.note
