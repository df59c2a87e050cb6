"""The GPU health checks as an operator runs them: `pytest -m health` in simulation with one GPU
computing a wrong element, judged again from its record; and, on a fake NVML node, an XID
that fails the test it arrived in and a row remap that becomes pending during the run."""

from __future__ import annotations

from e2e import make_project, records, run_suite, thresholds_with
from selftests import fake_pynvml
from wirecheck.cli.judge import main as judge
from wirecheck.core.exit_codes import FAILED as EXIT_FAILED

WRONG_ON_GPU1 = '''
import pytest

@pytest.fixture
def gpu_health_workers():
    return "faulty_gpu_worker"  # rank 1 (GPU1) flips one bit of element 5 of every product after its reference
'''


def _short(data):
    data["gpu_health"]["simulated"]["sustained"]["duration"] = {"quick": "0.5 s", "acceptance": "1 s", "burn_in": "2 s"}
    # Not a test of speed: two CPU ranks on a loaded 2-core machine ran 8x apart (87 % below their peer, load 10-14),
    # past the shipped simulated peer rule (80 %); only a wrong result may fail here.
    data["gpu_health"]["peers"]["simulated"]["max_below_median"] = "99 %"


def test_a_gpu_with_one_wrong_element_fails_by_name_and_its_record_judges_the_same(pytester, capsys):
    root = make_project(pytester, thresholds_text=thresholds_with(_short), tests_conftest=WRONG_ON_GPU1)
    out = root / "run.jsonl"
    result = run_suite(pytester, "--simulate=h200-sxm-2", f"--thresholds={root / 'thresholds.yaml'}", "-m", "health",
                       "-v", "-rf", f"--wirecheck-json={out}")
    text = result.stdout.str()
    failed = sorted(line.split()[1] for line in result.outlines if line.startswith("FAILED "))
    assert failed == ["tests/test_gpu_health.py::test_gemm_matches_reference[gpu1]"], text
    assert "test_gemm_matches_reference[gpu0] PASSED" in text
    assert "figures: 3 of 3 results differ from the reference, 3 elements in all; first: result 1, element 5 (row 0, col 5)" in text
    assert "sustained: " in text and "first: window 0, element 5 (row 0, col 5)" in text
    # the tables -v prints, and every GPU's figures in the record
    for title in ("GPU figures (2 GPUs at once)", "sustained load on GPU1 (acceptance, every GPU at once)",
                  "memory pattern test"):
        assert title in text, title
    kinds = sorted(r["kind"] for r in records(out) if r["type"] == "measurement")
    # and the spare workers the GPU load's ranks were taken from (wirecheck.workers.spares)
    assert kinds == ["gpu_figures"] * 2 + ["gpu_memory"] * 2 + ["gpu_sustained"] * 2 + ["spare_workers"]
    assert judge([str(out), "--thresholds", str(root / "thresholds.yaml")]) == EXIT_FAILED
    judged = capsys.readouterr().out
    assert "1 failed" in judged and "FAIL gemm_matches_reference GPU1" in judged


FAKE_NODE = '''
import sys
import time

import fake_pynvml
import pytest

# A 2-GPU NVSwitch node as NVML describes it: the suite runs on it as on a GPU node (no --simulate).
SCENARIO = fake_pynvml.nvswitch(2, links=0)
sys.modules["pynvml"] = NVML = fake_pynvml.build(SCENARIO)


@pytest.fixture
def fake_node():
    return NVML, SCENARIO
'''

# Named as a module the suite runs before its end-of-run checks (fixtures/pytest_wirecheck/placements.py).
PROBE = '''
import time


def test_quiet():
    pass


def test_during_which_gpu1_reports_xid_79(fake_node):
    nvml, scenario = fake_node
    nvml.emit(1, 0x8, 79)
    scenario.gpus[1].remapped = (0, 1, 1, 0)  # and a row remap becomes pending
    deadline = time.monotonic() + 60  # the watch takes it within its 0.05 s wait; a loaded machine runs it late
    while nvml.pending_events() and time.monotonic() < deadline:
        time.sleep(0.05)


def test_after_it():
    pass
'''


def test_an_xid_fails_the_test_it_arrived_in_and_a_pending_remap_fails_at_the_end(pytester):
    def quick_watch(data):
        data["gpu_health"]["xid"]["wait"] = "0.05 s"

    root = make_project(pytester, thresholds_text=thresholds_with(quick_watch), tests_conftest=FAKE_NODE)
    (root / "tests" / "test_network.py").write_text(PROBE)
    out = root / "run.jsonl"
    result = run_suite(pytester, "tests/test_network.py", "tests/test_gpu_health_errors.py", "-rf",
                       f"--thresholds={root / 'thresholds.yaml'}", f"--node-lock={root / 'node.lock'}",
                       f"--wirecheck-json={out}")
    text = result.stdout.str()
    failed = sorted(line.split()[1] for line in result.outlines if line.startswith("FAILED "))
    assert failed == ["tests/test_gpu_health_errors.py::test_ecc_and_row_remap_growth[gpu1]",
                      "tests/test_gpu_health_errors.py::test_no_xid_during_run",
                      "tests/test_network.py::test_during_which_gpu1_reports_xid_79"], text
    assert result.parseoutcomes()["passed"] == 3, text  # test_quiet, test_after_it, GPU0's memory errors
    assert "XID and ECC events during tests/test_network.py::test_during_which_gpu1_reports_xid_79 (call)" in text
    assert "XID 79 (the GPU has fallen off the bus) on GPU1 (00000000:28:00.0) at " in text
    assert "a row remap is pending" in text
    xids = [r for r in records(out) if r.get("kind") == "gpu_event"]
    assert [(r["details"]["gpu"], r["details"]["code"]) for r in xids] == [(1, 79)]
    verdicts = [r for r in records(out) if r["type"] == "verdict" and r["check"] == "no_xid"]
    assert [v["outcome"] for v in verdicts] == ["fail", "fail"]
    # the end line keeps the node as NVML tells it at the end: what validate --trust-recent compares with later
    (end,) = [r for r in records(out) if r["type"] == "end"]
    snap = end["node_snapshot"]
    assert [g["uuid"] for g in snap["gpus"]] == [g.uuid for g in fake_pynvml.nvswitch(2, links=0).gpus]
    assert [g["remapped_rows"]["pending"] for g in snap["gpus"]] == [0, 1] and snap["driver"] == "580.159.04"
