"""Manual GC for the training steps (training/manual_gc.py), the host figures in each strategy
record (training/host.py), and the workers' NCCL_GRAPH_MIXING_SUPPORT default (workers/spawn.py)."""

from __future__ import annotations

import gc
import os

import pytest

from wirecheck.workers import spawn
from wirecheck.training import host
from wirecheck.training.manual_gc import ManualGC


class Cycle:
    def __init__(self):
        self.me = self


def _cycles_alive() -> int:
    return sum(1 for o in gc.get_objects() if type(o) is Cycle)


@pytest.fixture
def gc_state():
    was = gc.isenabled()
    gc.enable()
    gc.collect()
    yield
    (gc.enable if was else gc.disable)()


def test_manual_gc_turns_automatic_collection_off_and_collects_on_schedule(gc_state):
    m = ManualGC(3)
    m.start()
    assert not gc.isenabled()
    for _ in range(20_000):  # far past the gen-0 threshold: automatic GC would have run
        Cycle()
    assert _cycles_alive() >= 20_000  # nothing collected them
    m.at_step(1)
    m.at_step(2)
    assert _cycles_alive() >= 20_000  # not a multiple of gc_freq yet
    m.at_step(3)
    assert _cycles_alive() == 0  # the young generations collected at the scheduled step
    m.stop()
    assert gc.isenabled()  # the previous state is back


def test_manual_gc_zero_leaves_python_in_charge(gc_state):
    m = ManualGC(0)
    m.start()
    assert gc.isenabled()
    m.stop()
    assert gc.isenabled()


def test_manual_gc_restores_a_disabled_collector_as_disabled(gc_state):
    gc.disable()
    m = ManualGC(50)
    m.start()
    m.stop()
    assert not gc.isenabled()


@pytest.mark.parametrize("bad", [-1, 2.5, True, "50"])
def test_manual_gc_refuses_a_bad_frequency(bad):
    with pytest.raises(ValueError, match="gc_freq must be a whole number"):
        ManualGC(bad)


def test_host_watch_counts_collections_and_reads_steal(monkeypatch, gc_state):
    readings = iter([(100, 10_000), (150, 11_000)])  # 50 steal jiffies of 1000
    monkeypatch.setattr(host, "_cpu_jiffies", lambda: next(readings))
    with host.HostWatch() as watch:
        gc.collect()
        gc.collect()
    figures = watch.figures()
    assert figures["gc_collections"] == 2 and figures["gc_s"] > 0
    assert figures["steal_fraction"] == pytest.approx(0.05)
    assert 0 < figures["python_loop_s"] < 10  # 100k rounds take milliseconds on any host, a loaded one included
    gc.collect()
    assert watch.figures()["gc_collections"] == 2  # the callback is gone after the block


def test_host_watch_without_proc_stat(monkeypatch):
    monkeypatch.setattr(host, "_cpu_jiffies", lambda: None)
    with host.HostWatch() as watch:
        pass
    assert watch.figures()["steal_fraction"] is None


def test_proc_stat_is_read_where_linux_has_it():
    # Without /proc/stat there is nothing to read (None is then right, test_host_watch_without_proc_stat);
    # with it, None would be a parser that lost the cpu line: that must fail, not pass unchecked.
    if not os.access("/proc/stat", os.R_OK):
        pytest.skip("this host has no readable /proc/stat (not Linux): nothing to parse")
    jiffies = host._cpu_jiffies()
    assert jiffies is not None, "/proc/stat is readable but its cpu line was not parsed"
    steal, total = jiffies
    assert 0 <= steal <= total and total > 0


def _env(monkeypatch, **parent):
    for k in ("NCCL_GRAPH_MIXING_SUPPORT",):
        monkeypatch.delenv(k, raising=False)
    for k, v in parent.items():
        monkeypatch.setenv(k, v)
    return spawn.rank_env(0, world_size=2, gpus=None, extra={})


def test_workers_run_without_nccl_graph_mixing_support_unless_told(monkeypatch):
    assert _env(monkeypatch)["NCCL_GRAPH_MIXING_SUPPORT"] == "0"
    assert _env(monkeypatch, NCCL_GRAPH_MIXING_SUPPORT="1")["NCCL_GRAPH_MIXING_SUPPORT"] == "1"  # the user's value wins
    assert _env(monkeypatch, NCCL_NVLS_ENABLE="0")["NCCL_NVLS_ENABLE"] == "0"  # the parent's switches pass through
