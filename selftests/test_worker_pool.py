"""The worker pool (wirecheck.workers.pool): its hang memory (a hang retires the placement's wire, its GPUs
and NCCL path; a death does not; the reason names the hang, and the pytest plugin skips with it), and
one pool serving every placement, a fault in it named and the pool rebuilt."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from wirecheck.measure.sweep import calls_per_size
from wirecheck.core import failures as F
from wirecheck.workers.launcher import WorkerCrash, WorkerTimeout
from wirecheck.workers.pool import Unavailable, WorkerPool, wire_key
from wirecheck.node.placement import Placement

NVSWITCH = Placement(klass="nvswitch", gpus=(0, 1))
PAIR = Placement(klass="pair", gpus=(0, 1))
FORCED = Placement(klass="forced_pcie", gpus=(0, 1), env={"NCCL_P2P_DISABLE": "1"})
OTHER = Placement(klass="nvswitch", gpus=(2, 3))


def _failure(kind: str, label: str = "nvswitch-2gpu-0.1") -> F.GroupFailure:
    rank = F.RankFailure(rank=1, kind=kind, at=None if kind == F.HUNG else 1.0, summary="x")
    return F.GroupFailure(label=label, what="all_reduce at 8 B", phase=F.CALL, root=rank, ranks=(rank,),
                          deadline_s=10.0, log_dir="/logs/nvswitch-2gpu-0.1-abc")


def _pool() -> WorkerPool:
    return WorkerPool([NVSWITCH, PAIR, FORCED, OTHER], backend="nccl", simulated=False, timeout_s=120)


def test_a_hang_retires_the_wire_and_the_reason_names_it():
    pool = _pool()
    pool.failed(NVSWITCH, WorkerTimeout("hung", label=NVSWITCH.id, what="all_reduce at 8 B", failure=_failure(F.HUNG)))
    with pytest.raises(Unavailable, match=r"^nvswitch-2gpu-0\.1 hung earlier \(all_reduce at 8 B did not "
                       r"finish within 10s; logs in /logs/nvswitch-2gpu-0\.1-abc\): its remaining tests are skipped$"):
        pool.shared(NVSWITCH)
    with pytest.raises(Unavailable, match=r"^pair-0\.1: the same GPUs and path as nvswitch-2gpu-0\.1, which "
                       r"hung earlier"):
        pool.fresh(PAIR)
    # Another path on the same GPUs, and other GPUs, are still tried.
    pool.check(FORCED)
    pool.check(OTHER)
    assert wire_key(FORCED) != wire_key(NVSWITCH) == wire_key(PAIR)


def test_a_dead_rank_does_not_retire_the_placement():
    pool = _pool()
    pool.failed(NVSWITCH, WorkerCrash("died", label=NVSWITCH.id, what="x", failure=_failure(F.DIED)))
    pool.check(NVSWITCH)  # nothing unavailable: the next test gets a fresh group
    assert not pool.hung


def test_a_simulation_runs_no_more_ranks_than_it_can():
    big = Placement(klass="nvswitch", gpus=tuple(range(9)))
    pool = WorkerPool([big], backend="gloo", simulated=True, timeout_s=120)
    with pytest.raises(Unavailable, match=r"nvswitch-9gpu-0\.1\.2\.3\.4\.5\.6\.7\.8: simulation runs at most 8 CPU ranks"):
        pool.shared(big)
    with pytest.raises(Unavailable, match=r"simulation runs training on at most 2 CPU ranks"):
        pool.fresh(Placement(klass="nvswitch", gpus=(0, 1, 2)))


def test_calls_per_size_counts_graph_replays():
    eager_only = SimpleNamespace(warmup_iters=5, iters=20, graph_up_to=None)
    graphs = SimpleNamespace(warmup_iters=5, iters=20, graph_up_to=64 << 20, graph_replays=5)
    assert calls_per_size(eager_only, 8) == 26
    # eager 26, then the warm replay (20), five timed replays (100) and the checked replay (1)
    assert calls_per_size(graphs, 8) == 26 + 20 + 100 + 1 and calls_per_size(graphs, 1 << 30) == 26



def test_one_pool_serves_every_placement_and_a_fault_in_it_is_named_then_the_pool_is_rebuilt():
    """Three gloo ranks, one per simulated GPU, sub-groups 0.1.2, 0.1 and 1.2 made once. A rank of 0.1 that
    hangs and one of 1.2 that dies each fail their call naming placement, op and size (what was measured
    before stays in the record); the pool is ended and the next call runs on a new one, and passes."""
    from wirecheck.measure.sweep import run_sweep
    from wirecheck.thresholds.file import load_thresholds
    from wirecheck.workers.deadlines import Deadline

    th = load_thresholds(Path(__file__).resolve().parents[1] / "thresholds.yaml")
    whole, a, b = (Placement(klass="nvswitch", gpus=g) for g in ((0, 1, 2), (0, 1), (1, 2)))
    settings = th.collective_settings(True)
    pool = WorkerPool([whole, a, b], backend="gloo", simulated=True, timeout_s=settings.timeout_s,
                      deadline=lambda placement, op, size, calls: Deadline(4.0, "the test's"))
    kept = []
    record = SimpleNamespace(measurement=kept.append)
    hang = "selftests.faulty_workers:measure_hang"  # rank 1 of the sub-group never comes to all_reduce
    try:
        assert not run_sweep(pool, whole, "all_gather", [64], settings, record=record).error
        assert not run_sweep(pool, a, "all_gather", [64], settings, worker=hang, record=record).error
        pids = pool.pids
        assert len(pids) == 3 and pool.starts == 1  # one pool served both placements
        # Work that needs a GPU alone never shares a pool over more than one GPU (that is a one-GPU node's).
        assert pool.alone((0,), "copies") is None and pool.alone((0, 1, 2), "copies") is None
        hung = run_sweep(pool, a, "all_reduce", [64], settings, worker=hang, record=record)
        assert hung.failure.label == a.id and hung.failure.kind == F.HUNG
        assert hung.error.startswith("all_reduce at 64 B on nvswitch-2gpu-0.1 did not finish within 4s")
        assert hung.failure.replied == (2,)  # GPU 2 is not in 0.1: it answered at once
        assert pool.pids == [] and wire_key(a) in pool.hung
        # Every size measured was recorded as it came, and the hang as a size that did not finish.
        assert [(m.placement, m.details["op"], m.value is None) for m in kept] == [
            (whole.id, "all_gather", False), (a.id, "all_gather", False), (a.id, "all_reduce", True)]

        died = None
        try:
            pool.shared(b).run("selftests.faulty_workers:die", {"rank": 1}, timeout_s=20, what="a death")
        except WorkerCrash as exc:
            died = exc.failure
            pool.failed(b, exc)
        assert died is not None and died.label == b.id and died.root.rank == 2  # rank 1 of 1.2 is GPU 2
        assert pool.starts == 2 and wire_key(b) not in pool.hung

        fine = run_sweep(pool, whole, "all_reduce", [64], settings, record=record)
        assert not fine.error and fine.results[0].wrong == 0 and pool.starts == 3
        assert set(pool.pids).isdisjoint(pids)
    finally:
        pool.close()


def test_a_one_gpu_nodes_pool_serves_the_load_and_then_the_work_that_needs_the_gpu_alone():
    """A node without collective placements (one GPU): the GPU load's `for_gpus` starts a pool over that GPU, and
    `alone` hands its one worker to the copies and one GPU's training: the same process, no second start. Where
    the pool is over more than one GPU, or not running, `alone` is None (the caller starts its own process).
    The one worker joins no process group."""
    from wirecheck.training.scaling import SingleGpuRun
    from wirecheck.training.strategy_run import run_on_fresh_group

    whoami = "selftests.faulty_workers:whoami"
    single = Placement(klass="single", gpus=(0,))
    pool = WorkerPool([], backend="gloo", simulated=True, timeout_s=60)
    try:
        assert pool.alone((0,), "copies") is None  # nothing running yet
        (load,) = pool.for_gpus((0,), "gpu-health").run(whoami, {}, timeout_s=60)
        (copies,) = pool.alone((0,), "copies").run(whoami, {}, timeout_s=60)
        run = run_on_fresh_group(pool, SingleGpuRun(single), whoami, {}, 60, "one GPU", may_share=True)
        assert copies["pid"] == load["pid"] == run.ranks[0]["pid"] and pool.starts == 1
        assert run.workers == "pool" and pool.pids == [load["pid"]]  # the pool goes on after it
        assert not load["dist_initialized"]  # one worker has no one to talk to: no process group to start and end
    finally:
        pool.close()
    # A pool over more than one GPU: test_one_pool_serves_every_placement_... asks `alone` of its three ranks.
