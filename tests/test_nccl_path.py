"""NCCL's path as evidence: what NCCL says it connected each pair of GPUs with.

Per placement that runs collectives, the NCCL INFO lines of the placement's own communicator in the run's
pool (one worker per GPU, a sub-group per placement), logged when the pool made and connected it (one file
per rank beside the run's record file: `<record>.nccl/pool-<n>/`): the communicator every collective of the
placement runs on. This process reads them from the files at the offsets the ranks gave (no call on the
workers, no group started for the path: only a placement no pool of the run has made yet gets the pool
started, as its collectives would). The record keeps NCCL's transport per pair, path type, graphs and
channel counts (no algorithm per collective: the pool logs no line per call); the check asserts P2P over
NVLink between NVLink-connected GPUs and no P2P on the forced host path.
"""

from __future__ import annotations

import pytest

from wirecheck import checks
from wirecheck.nccl import log as nccl_log, path as nccl_path
from wirecheck.workers.launcher import WorkerError
from wirecheck.node.placement import COLLECTIVE_CLASSES
from wirecheck.records.file import Measurement
from wirecheck.vocab import records as kinds
from wirecheck.vocab.work import PROBE

pytestmark = [pytest.mark.stage("measure", order=3), pytest.mark.levels("quick", "acceptance", "burn-in")]


def _nv(node, placement) -> dict:
    topo = node.topology
    return {f"{a}-{b}": topo.nv_between(a, b) for i, a in enumerate(placement.gpus) for b in placement.gpus[i + 1:]}


def _forced_host_path(placement) -> bool:
    """The placement itself turns NCCL's P2P off (forced_pcie). A NCCL_P2P_DISABLE exported for the
    whole run does not count: NVLink placements must then fail, not be excused."""
    return placement.env.get("NCCL_P2P_DISABLE", "0").strip().lower() not in ("", "0", "false", "no")


def _read_path(worker_pool, placement) -> tuple[dict | None, list, str | None]:
    """NCCL's log lines of the placement's communicator in the run's pool; (summary, per-rank lines, error)."""
    try:
        ranks = nccl_path.read_pool_log(worker_pool, placement)
    except WorkerError as exc:
        worker_pool.failed(placement, exc)
        return None, [], str(exc)
    return nccl_log.summarize(r["text"] for r in ranks), ranks, None


# The path is read from the pool's own communicators (made, connected and logged at the pool's start, which the
# collectives before this module started): the quick level reads the largest placement of each class.
@pytest.mark.work(PROBE)
@pytest.mark.placements(*COLLECTIVE_CLASSES, one_per_class=("quick",))
def test_nccl_path(node, worker_pool, placement, reporter, record):
    """NVLink-connected GPUs talk over NCCL's P2P transport on an NVLink path; the forced host path uses no P2P."""
    summary, ranks, error = (None, [], None) if node.simulated else _read_path(worker_pool, placement)
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


def _pool_placement(node):
    """The placement the run's pool starts for: the first collective placement without an environment of its own."""
    return next((p for p in node.placements if p.klass in COLLECTIVE_CLASSES and not p.env), None)


# NCCL RAS's readiness diagnostics (NCCL >= 2.31) over the pool's communicators: a warn, beside the inventory,
# where the ranks differ in driver, ECC, NVLinks or NCCL_* settings; an older NCCL says it has none (a skip).
@pytest.mark.work(PROBE)
def test_nccl_ras_readiness(node, worker_pool, reporter, record):
    """The ranks of the run's NCCL job agree in GPU inventory, driver, ECC, NVLinks and NCCL_* settings (RAS)."""
    placement = None if node.simulated else _pool_placement(node)
    reading = None
    if placement is not None:
        try:
            reading = worker_pool.ras_diagnostics(placement)
        except WorkerError as exc:
            worker_pool.failed(placement, exc)
            reading = {"answered": False, "absent": f"the pool did not start: {exc}"}
        reporter.measurement(Measurement(kinds.NCCL_RAS, None, "NCCL RAS readiness", None, None, reading))
    verdict = record(checks.nccl_ras.ras_readiness(node.thresholds, reading=reading, simulated=node.simulated))
    assert verdict.ok, verdict.message
