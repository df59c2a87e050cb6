"""The pool's hang memory: a hang retires the placement's wire (its GPUs and NCCL path), a death
does not; the skip names the hang. No process is started here."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from pytest_wirecheck.workers import WorkerPool, wire_key
from wirecheck.measure.sweep import calls_per_size
from wirecheck.core import failures as F
from wirecheck.workers.launcher import WorkerCrash, WorkerTimeout
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
    return WorkerPool(SimpleNamespace(simulated=False, thresholds=None))


def test_a_hang_retires_the_wire_and_the_skip_names_it():
    pool = _pool()
    pool.failed(NVSWITCH, WorkerTimeout("hung", label=NVSWITCH.id, what="all_reduce at 8 B", failure=_failure(F.HUNG)))
    with pytest.raises(pytest.skip.Exception, match=r"^nvswitch-2gpu-0\.1 hung earlier \(all_reduce at 8 B did not "
                       r"finish within 10s; logs in /logs/nvswitch-2gpu-0\.1-abc\): its remaining tests are skipped$"):
        pool.shared(NVSWITCH)
    with pytest.raises(pytest.skip.Exception, match=r"^pair-0\.1: the same GPUs and path as nvswitch-2gpu-0\.1, which "
                       r"hung earlier"):
        pool.fresh(PAIR)
    # Another path on the same GPUs, and other GPUs, are still tried.
    pool._check(FORCED)
    pool._check(OTHER)
    assert wire_key(FORCED) != wire_key(NVSWITCH) == wire_key(PAIR)


def test_a_dead_rank_does_not_retire_the_placement():
    pool = _pool()
    pool.failed(NVSWITCH, WorkerCrash("died", label=NVSWITCH.id, what="x", failure=_failure(F.DIED)))
    pool._check(NVSWITCH)  # no skip: the next test gets a fresh group
    assert not pool.hung


def test_calls_per_size_counts_graph_replays():
    eager_only = SimpleNamespace(warmup_iters=5, iters=20, graph_up_to=None)
    graphs = SimpleNamespace(warmup_iters=5, iters=20, graph_up_to=64 << 20, graph_replays=5)
    assert calls_per_size(eager_only, 8) == 26
    # eager 26, then the warm replay (20), five timed replays (100) and the checked replay (1)
    assert calls_per_size(graphs, 8) == 26 + 20 + 100 + 1 and calls_per_size(graphs, 1 << 30) == 26
