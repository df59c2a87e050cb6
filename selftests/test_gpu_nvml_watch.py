"""NVML beside the load, against a fake pynvml: the sampler's time series and throttle counters,
the XID event watch, and the memory-error readings compared over a run."""

from __future__ import annotations

import sys
import time

import pytest

from wirecheck.node import nvml
from wirecheck.node.gpu_sampling import LoadSampler, decode_reasons
from wirecheck.node.memory_errors import memory_errors
from wirecheck.node.xid_events import EVENT_DBE, EVENT_SBE, EVENT_XID, EventWatch, describe

try:  # selftests/ may or may not be a package
    from selftests import fake_pynvml as fake
except ModuleNotFoundError:
    import fake_pynvml as fake


@pytest.fixture
def install(monkeypatch):
    def _install(scenario: fake.Scenario):
        module = fake.build(scenario)
        monkeypatch.setitem(sys.modules, "pynvml", module)
        return module

    return _install


def test_the_sampler_reads_every_gpu_until_stopped_and_the_throttle_time_in_between(install):
    scenario = fake.nvswitch(2, links=0)
    scenario.gpus[1].clocks_event_reasons = 0x4 | 0x40
    module = install(scenario)
    sampler = LoadSampler([0, 1], interval_s=0.02).start()
    scenario.gpus[1].violation_ns[1] = 5_000_000  # 5 ms of thermal throttling during the load
    deadline = time.monotonic() + 60  # a few intervals, or longer where the machine runs the thread late
    while len(sampler.result.of(0)) < 3 and time.monotonic() < deadline:
        time.sleep(0.02)
    result = sampler.stop()
    assert result.error is None
    assert {s.gpu for s in result.samples} == {0, 1} and len(result.of(0)) >= 3
    s = result.of(1)[-1]
    assert (s.sm_mhz, s.power_w, s.temperature_c, s.utilization_pct) == (1980, 690.0, 60, 100)
    assert decode_reasons(s.reasons) == ["sw_power_cap", "hw_thermal"]
    limits = result.limits[0]
    assert (limits.power_limit_w, limits.slowdown_c, limits.shutdown_c, limits.max_sm_mhz) == (700.0, 89, 95, 1980)
    assert result.violations_ns[1]["thermal"] == 5_000_000 and result.violations_ns[0]["thermal"] == 0
    record = result.as_record(1)
    assert record["samples"][0]["sm_mhz"] == 1980 and "gpu" not in record["samples"][0]
    assert module.init_count() == 0  # the sampler's NVML session ended


def test_an_unreadable_reading_is_kept_with_its_reason(install):
    scenario = fake.nvswitch(1, links=0)
    scenario.gpus[0].not_supported = {"nvmlDeviceGetPowerUsage", "nvmlDeviceGetViolationStatus"}
    install(scenario)
    result = LoadSampler([0], interval_s=0.01).start().stop()
    assert all(s.power_w is None for s in result.samples)
    assert "NotSupported" in result.unsupported[0]["power"]
    assert result.violations_ns[0] == {}


def test_nvml_failing_to_start_is_an_error_not_a_quiet_gpu(install):
    install(fake.Scenario(gpus=[fake.FakeGpu(bus_id=fake.bus(0))], init_error="DriverNotLoaded"))
    result = LoadSampler([0], interval_s=0.01).start().stop()
    assert result.samples == [] and "no NVIDIA driver" in result.error


def test_the_watch_collects_an_xid_with_its_gpu_and_time(install):
    scenario = fake.nvswitch(2, links=0)
    module = install(scenario)
    watch = EventWatch([0, 1], wait_s=0.05).start()
    try:
        assert watch.watched == {0: ["xid", "ecc_dbe", "ecc_sbe", "row_remap_failure"],
                                 1: ["xid", "ecc_dbe", "ecc_sbe", "row_remap_failure"]}
        before = time.time()
        module.emit(1, EVENT_XID, 79)
        module.emit(0, EVENT_DBE, 0)
        deadline = time.monotonic() + 60
        while len(watch.events) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        watch.stop()
    xid, dbe = watch.events
    assert (xid.gpu, xid.kind, xid.code, xid.bus_id) == (1, "xid", 79, fake.bus(1)) and xid.time >= before
    assert (dbe.gpu, dbe.kind) == (0, "ecc_dbe")
    assert describe(xid.as_record()).startswith(f"XID 79 (the GPU has fallen off the bus) on GPU1 ({fake.bus(1)}) at ")
    assert module.init_count() == 0


def test_a_gpu_without_xid_events_is_listed_not_taken_for_quiet(install):
    scenario = fake.nvswitch(2, links=0)
    scenario.gpus[1].supported_events = EVENT_SBE  # no critical XIDs from this one
    scenario.gpus[0].not_supported = {"nvmlDeviceGetSupportedEventTypes"}
    install(scenario)
    watch = EventWatch([0, 1], wait_s=0.05).start()
    watch.stop()
    assert watch.watched == {}
    assert "NotSupported" in watch.unwatched[0] and "no critical XID events" in watch.unwatched[1]


def test_memory_errors_as_plain_data(install):
    scenario = fake.nvswitch(1, links=0)
    scenario.gpus[0].volatile_corrected, scenario.gpus[0].remapped = 3, (1, 0, 1, 0)
    install(scenario)
    (health,) = nvml.read_health()
    assert memory_errors(health) == {"volatile_sbe": 3, "volatile_dbe": 0,
                                     "remapped_rows": {"correctable": 1, "uncorrectable": 0, "pending": 1, "failure": 0}}
    scenario.gpus[0].not_supported = {"nvmlDeviceGetRemappedRows"}
    (health,) = nvml.read_health()
    assert "NotSupported" in memory_errors(health)["remapped_rows"]["unsupported"]
