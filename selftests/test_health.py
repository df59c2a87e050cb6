"""Error-counter growth over a run: deltas against the limits, never absolutes."""

from __future__ import annotations

from pathlib import Path

import pytest

from wirecheck.checks.health import counter_growth as check_growth
from wirecheck.node.health import counter_deltas
from wirecheck.node.nvml import GpuHealth, NvLinkCounters, Unsupported
from wirecheck.thresholds.file import load_thresholds

THRESHOLDS = load_thresholds(Path(__file__).resolve().parents[1] / "thresholds.yaml")


def counter_growth(before, after, seconds):
    deltas, unreadable = counter_deltas(before, after)
    return check_growth(THRESHOLDS, gpu=0, bus_id=after.bus_id, seconds=seconds, deltas=deltas, unreadable=unreadable), unreadable


def _health(replay=0, recovery=0, crc_flit=0, crc_data=0, pcie=0, links=2) -> GpuHealth:
    counters = tuple(NvLinkCounters(link, replay, recovery, crc_flit, crc_data) for link in range(links))
    na = Unsupported("not read in this test")
    return GpuHealth(index=0, bus_id="00000000:07:00.0", persistence_mode=1, ecc_mode=(1, 1), volatile_uncorrected_ecc=0,
                     remapped_rows=na, fabric_state=na, mig_mode=(0, 0), virtualization_mode=0, compute_processes=(),
                     nvlink_counters=counters, pcie_replay_counter=pcie, clocks_event_reasons=na)


def test_high_absolute_counts_that_do_not_grow_pass():
    verdict, unreadable = counter_growth(_health(crc_data=13, pcie=2), _health(crc_data=13, pcie=2), 60.0)
    assert verdict.outcome == "pass" and not unreadable


@pytest.mark.parametrize("counter, after", [
    ("NVLink 1 replay", {"replay": 1}),
    ("NVLink 1 recovery", {"recovery": 1}),
    ("NVLink 1 CRC", {"crc_flit": 4000, "crc_data": 3000}),  # > 100/s over 60 s
    ("PCIe replay", {"pcie": 20}),  # > 8/min over 60 s
])
def test_growth_past_the_limit_is_named(counter, after):
    verdict, _ = counter_growth(_health(), _health(**after), 60.0)
    assert verdict.outcome == "fail"
    assert any(b.startswith(counter) for b in verdict.details["problems"]), verdict.message
    assert verdict.yaml_path == "thresholds.yaml: health" and "DCGM" in verdict.source


def test_a_few_crc_errors_over_a_long_run_pass():
    verdict, _ = counter_growth(_health(), _health(crc_data=50), 60.0)
    assert verdict.outcome == "pass"


def test_unreadable_counters_are_listed_not_passed():
    before = _health(pcie=Unsupported("NotSupported"))
    verdict, unreadable = counter_growth(before, _health(pcie=500), 60.0)
    assert "PCIe replay" in unreadable and "PCIe replay" not in verdict.measured
    assert verdict.outcome == "pass"  # the readable counters did not grow; the unreadable one is listed, not judged
