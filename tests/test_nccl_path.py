"""NCCL's path as evidence: what NCCL says it connected each pair of GPUs with.

Per placement that runs collectives, a fresh small worker group runs with NCCL's INFO logging
(one file per rank beside the run's record file), does each collective once at the smallest
and the floor size, and hands its log back. The record keeps NCCL's transport per pair, path
type, graphs, channel counts and algorithm/protocol per collective; the check asserts P2P over
NVLink between NVLink-connected GPUs and no P2P on the forced host path.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from wirecheck import checks
from wirecheck.nccl import log as nccl_log, path as nccl_path
from wirecheck.vocab.ops import OPS
from wirecheck.workers.launcher import WorkerError, WorkerGroup
from wirecheck.node.placement import COLLECTIVE_CLASSES
from wirecheck.records.file import Measurement
from wirecheck.core.safefs import make_dirs
from wirecheck.vocab import records as kinds
from wirecheck.vocab.work import PROBE

pytestmark = [pytest.mark.stage("measure", order=3), pytest.mark.levels("quick", "acceptance", "burn-in")]

PROBE_WORKER = "wirecheck.nccl.path:probe"


@pytest.fixture(scope="module")
def nccl_log_dir(reporter) -> Path:
    """NCCL's logs go beside the record file: `<record>.nccl/<placement>/nccl.<pid>.log`."""
    return reporter.file.path.with_suffix(".nccl")  # made when a probe runs (never in simulation)


def _nv(node, placement) -> dict:
    topo = node.topology
    return {f"{a}-{b}": topo.nv_between(a, b) for i, a in enumerate(placement.gpus) for b in placement.gpus[i + 1:]}


def _forced_host_path(placement) -> bool:
    """The placement itself turns NCCL's P2P off (forced_pcie). A NCCL_P2P_DISABLE exported for the
    whole run does not count: NVLink placements must then fail, not be excused."""
    return placement.env.get("NCCL_P2P_DISABLE", "0").strip().lower() not in ("", "0", "false", "no")


def _probe(node, worker_pool, placement, log_dir: Path) -> tuple[dict | None, list, str | None]:
    """Run the probe on a fresh group; (summary, per-rank results, error)."""
    settings = node.thresholds.collective_settings(node.simulated)
    sizes = sorted({min(settings.sizes), settings.floor_size})
    worker_pool.close()  # the shared group must not hold the GPUs meanwhile
    # NCCL writes its logs itself (fopen, following links): as root, only into a folder no other user
    # can redirect (safefs.make_dirs).
    log_dir = make_dirs(log_dir / placement.id, what="NCCL's log folder",
                        fix="pass --wirecheck-json with a path in a folder only root can write (NCCL's logs go beside it)")
    try:
        with WorkerGroup(label=placement.id, world_size=placement.n_gpus, backend=node.backend, gpus=placement.gpus,
                         env={**placement.env, **nccl_path.debug_env(log_dir)}) as group:
            ranks = group.run(PROBE_WORKER, {"ops": list(OPS), "sizes": sizes}, timeout_s=settings.timeout_s,
                              what="NCCL path probe")
    except WorkerError as exc:
        return None, [], str(exc)
    return nccl_log.summarize(r["text"] for r in ranks), ranks, None


# Each probe is a fresh worker group (seconds): the quick level probes the largest placement of each class.
@pytest.mark.work(PROBE)
@pytest.mark.placements(*COLLECTIVE_CLASSES, one_per_class=("quick",))
def test_nccl_path(node, worker_pool, placement, nccl_log_dir, reporter, record):
    """NVLink-connected GPUs talk over NCCL's P2P transport on an NVLink path; the forced host path uses no P2P."""
    summary, ranks, error = (None, [], None) if node.simulated else _probe(node, worker_pool, placement, nccl_log_dir)
    if not node.simulated:
        reporter.measurement(Measurement(
            kinds.NCCL_PATH, placement.id, "NCCL path", None, None,
            {**(summary or {}), "error": error, "log_files": [r["log_path"] for r in ranks],
             "gpus": list(placement.gpus), "env": ranks[0]["nccl_env"] if ranks else {}}))
    verdict = record(checks.nccl_path.nccl_path(
        node.thresholds, placement=placement.id, gpus=list(placement.gpus), nv=_nv(node, placement),
        p2p_disabled=_forced_host_path(placement),
        evidence={k: summary[k] for k in ("connections", "path_types", "info_lines")} if summary else None,
        simulated=node.simulated, error=error))
    assert verdict.ok, verdict.message
