"""Errors the GPUs reported over the whole run, judged after everything else ran: XIDs (an XID
also fails the test it arrived in: fixtures/pytest_wirecheck/gpu_health.py) and memory-error counters (volatile
ECC errors, remapped rows) read at session start and again now."""

from __future__ import annotations

import time

import pytest

from wirecheck import checks
from wirecheck.node.memory_errors import memory_errors

pytestmark = [pytest.mark.stage("last", order=2), pytest.mark.health,
              pytest.mark.levels("quick", "acceptance", "burn-in")]


@pytest.fixture(scope="module")
def health_now(live, worker_pool):
    """(monotonic time, NVML health per GPU) after the run; the suite's own workers closed first."""
    worker_pool.close()
    return time.monotonic(), {h.index: h for h in live.read_health()}


@pytest.mark.work()
def test_no_xid_during_run(node, xid_watch, record):
    """No critical XID (nor uncorrectable ECC or row-remap failure) since the session started."""
    if xid_watch is None and not node.simulated:
        pytest.skip(f"no XID watch: {node.skip_reason() or 'NVML did not answer at session start'}")
    events = xid_watch.all_events() if xid_watch else []
    watch = xid_watch.inputs() if xid_watch else {"watched": [], "unwatched": {}, "error": None}
    verdict = record(checks.gpu_health.no_xid(node.thresholds, events=events, **watch, simulated=node.simulated))
    assert verdict.ok, verdict.message


@pytest.mark.work()
def test_ecc_and_row_remap_growth(node, gpu, health_now, record):
    """Volatile ECC errors and remapped rows did not grow over the run; no remap pending or failed."""
    if node.health_at_start is None:
        pytest.skip("no NVML reading at session start")
    started, before = node.health_at_start
    now, after = health_now
    earlier = {h.index: h for h in before}[gpu]
    verdict = record(checks.gpu_health.ecc_row_remap_growth(
        node.thresholds, gpu=gpu, bus_id=after[gpu].bus_id, before=memory_errors(earlier),
        after=memory_errors(after[gpu]), seconds=now - started, simulated=node.simulated))
    assert verdict.ok, verdict.message
