"""NVIDIA DCGM's diagnostics as one test of the run (`--dcgm r1|r2|r3|r4`, also `wirecheck validate --dcgm r2`).

`dcgmi diag -r LEVEL -j` runs on the node's GPUs alone (the run's pool is closed first), bounded in time
(wirecheck.node.dcgm.TIMEOUT_S); its output goes into the record (a `dcgm_diag` measurement: level, version,
seconds, exit status, the JSON), and each test and GPU becomes a `dcgm_diag` verdict, judged as DCGM judged it:
a DCGM Fail fails this test, a Warn warns, Skip and Not Run are said. Where dcgmi is not installed the test
skips naming it; without --dcgm it skips (opt-in: DCGM's levels take minutes to hours).
"""

from __future__ import annotations

import warnings

import pytest

from pytest_wirecheck.reporting import VerdictWarning, verdicts_key
from wirecheck.checks import dcgm as dcgm_check
from wirecheck.core.verdict import FAIL, SKIP, WARN
from wirecheck.node import dcgm
from wirecheck.records.file import Measurement
from wirecheck.vocab import records as kinds

pytestmark = [pytest.mark.stage("measure", order=0), pytest.mark.levels("quick", "acceptance", "burn-in")]


def _gpus(node) -> list[dict]:
    return [{"index": g.index, "serial": getattr(g, "serial", None), "bus_id": g.bus_id, "uuid": getattr(g, "uuid", None),
             "name": g.name} for g in node.topology.gpus] if node.topology is not None else []


@pytest.mark.work(opt_in="runs only with --dcgm r1|r2|r3|r4")
def test_dcgm_diag(request, node, worker_pool, reporter):
    """DCGM's own diagnostics pass on every GPU (each test and GPU a verdict of the record)."""
    asked = request.config.getoption("dcgm")
    if not asked:
        pytest.skip("DCGM diagnostics not asked: --dcgm r1|r2|r3|r4 runs `dcgmi diag` as part of the run")
    if node.simulated:
        pytest.skip("simulation: DCGM's diagnostics need the node's GPUs")
    found = dcgm.find_dcgmi()
    if found is None:
        pytest.skip("dcgmi is not on PATH: DCGM's diagnostics not run (install NVIDIA's datacenter-gpu-manager and "
                    "start nv-hostengine)")
    level = dcgm.level(asked)
    worker_pool.close()  # DCGM's stress tests need the GPUs alone
    ran = dcgm.run(found, level)
    reporter.measurement(Measurement(kinds.DCGM_DIAG, None, f"dcgmi diag -r {level}", ran.seconds, "s", {
        "level": level, "argv": ran.argv, "exit_status": ran.returncode, "error": ran.error,
        "version": ran.run.version if ran.run else None, "driver": ran.run.driver if ran.run else None,
        "output": ran.output[-256 * 1024:]}))
    if ran.run is None:
        pytest.fail(f"DCGM diagnostics gave no result: {ran.error}", pytrace=False)
    verdicts = dcgm_check.judge(ran.run, _gpus(node), node.thresholds)
    for verdict in verdicts:  # one test, many verdicts: each one recorded, none of them ends the test early
        reporter.verdict(verdict, request.node.nodeid)
        request.node.stash.setdefault(verdicts_key, []).append(verdict)
        if verdict.outcome == WARN:
            warnings.warn(VerdictWarning(verdict.message), stacklevel=1)
    failed = [v for v in verdicts if v.outcome == FAIL]
    if failed:
        pytest.fail("\n".join(v.message for v in failed), pytrace=False)
    if all(v.outcome == SKIP for v in verdicts):
        pytest.skip("; ".join(v.message for v in verdicts)[:500])
