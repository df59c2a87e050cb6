"""Error counters after the measurements: the links must not have needed replays, recoveries
or a CRC storm while the suite loaded them (read at session start and now; runs last)."""

from __future__ import annotations

import time

import pytest

from wirecheck.health import counter_growth


def test_error_counters_did_not_grow(node, live, gpu, worker_pool, record):
    if node.health_at_start is None:
        pytest.skip("no NVML reading at session start")
    worker_pool.close()
    started, before = node.health_at_start
    after = live.read_health()[gpu]
    found, unreadable = counter_growth(before[gpu], after, time.monotonic() - started, node.thresholds.health)
    bad = [g for g in found if not g.ok]
    record("health", f"GPU{gpu} error-counter growth", value={g.counter: g.grew_by for g in found if g.grew_by},
           limit={"source": node.thresholds.health.source, "yaml_path": node.thresholds.health.yaml_path},
           verdict="fail" if bad else ("pass" if found else "skip"), details={"unreadable": unreadable})
    if not found:
        pytest.skip(f"GPU{gpu}: no error counter readable ({', '.join(unreadable)})")
    assert not bad, (f"GPU{gpu} ({after.bus_id}): error counters grew during the run: " + "; ".join(map(str, bad))
                     + f" ({node.thresholds.health.yaml_path}; source: {node.thresholds.health.source})")
