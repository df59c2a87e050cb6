"""Error counters after the measurements: the links must not have needed replays, recoveries
or a CRC storm while the suite loaded them (read at session start and now; runs last)."""

from __future__ import annotations

import time

import pytest

from wirecheck import checks
from wirecheck.node.health import counter_deltas

pytestmark = [pytest.mark.stage("last", order=1), pytest.mark.levels("quick", "acceptance", "burn-in")]


@pytest.mark.work()
def test_error_counters_did_not_grow(node, live, gpu, worker_pool, record):
    if node.health_at_start is None:
        pytest.skip("no NVML reading at session start")
    worker_pool.close()
    started, before = node.health_at_start
    after = {h.index: h for h in live.read_health()}[gpu]
    earlier = {h.index: h for h in before}[gpu]
    deltas, unreadable = counter_deltas(earlier, after)
    verdict = record(checks.health.counter_growth(
        node.thresholds, gpu=gpu, bus_id=after.bus_id, seconds=time.monotonic() - started, deltas=deltas,
        unreadable=unreadable))
    assert verdict.ok, verdict.message
