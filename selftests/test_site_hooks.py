"""The pytest_wirecheck_* hooks (fixtures/pytest_wirecheck/hooks.py), implemented by a site's conftest.py: a header
field, a placement dropped and one added, every measurement and verdict observed as recorded.
No worker runs: a site test file records a measurement itself."""

from __future__ import annotations

import json

from e2e import make_project, records, run_suite

SITE_CONFTEST = '''
import json
import os

from wirecheck.node.placement import Placement

LOG = os.environ["SITE_HOOK_LOG"]


def _log(**entry):
    with open(LOG, "a") as f:
        f.write(json.dumps(entry) + "\\n")


def pytest_wirecheck_header(header):
    header["site"] = {"rack": "r7", "asset": "A-1234"}


def pytest_wirecheck_placements(topology, placements):
    placements[:] = [p for p in placements if p.klass != "forced_pcie"]
    placements.append(Placement("nvl_pair", (0, 1)))  # a class this NVSwitch node does not enumerate


def pytest_wirecheck_measurement(measurement):
    _log(type="measurement", what=measurement.what, placement=measurement.placement)


def pytest_wirecheck_verdict(verdict, test):
    _log(type="verdict", check=verdict.check, where=verdict.where, test=test)
'''

SITE_TESTS = '''
import pytest

from wirecheck import checks
from wirecheck.records.file import Measurement


@pytest.mark.placements("nvl_pair", "forced_pcie")
def test_site_probe(node, placement, reporter, record):
    reporter.measurement(Measurement("site", placement.id, "site probe", 1.0, "x", {}))
    verdict = record(checks.measurement_completed(node.thresholds, what="site probe", placement=placement.id,
                                                  error=None))
    assert verdict.ok, verdict.message
'''


def test_a_site_conftest_extends_the_run(pytester, tmp_path):
    root = make_project(pytester, tests_conftest=SITE_CONFTEST)
    (root / "tests" / "test_site.py").write_text(SITE_TESTS)
    log = tmp_path / "hooks.jsonl"
    pytester._monkeypatch.setenv("SITE_HOOK_LOG", str(log))
    result = run_suite(pytester, "--simulate=h200-sxm-2", f"--wirecheck-json={tmp_path / 'run.jsonl'}",
                       "tests/test_site.py", "tests/test_topology.py", "-v")
    out = result.stdout.str()
    assert result.ret == 10, out
    run = records(tmp_path / "run.jsonl")
    header = run[0]
    assert header["site"] == {"rack": "r7", "asset": "A-1234"}
    ids = [p["id"] for p in header["placements"]]
    assert "nvl_pair-2gpu-0.1" in ids and not [i for i in ids if i.startswith("forced_pcie")], ids
    # the added placement parametrizes the tests; the dropped one is gone
    assert "test_site_probe[nvl_pair-2gpu-0.1] PASSED" in out, out
    assert not [line for line in out.splitlines() if "::" in line and "forced_pcie" in line], out
    seen = [json.loads(line) for line in log.read_text().splitlines()]
    measured = [{"type": "measurement", "what": r["what"], "placement": r["placement"]}
                for r in run if r["type"] == "measurement"]
    judged = [{"type": "verdict", "check": r["check"], "where": r["where"], "test": r["test"]}
              for r in run if r["type"] == "verdict"]
    assert [e for e in seen if e["type"] == "measurement"] == measured and len(measured) == 1, seen
    assert [e for e in seen if e["type"] == "verdict"] == judged and len(judged) >= 3, seen


def test_a_placement_hook_that_leaves_a_copy_is_a_usage_error(pytester):
    make_project(pytester, tests_conftest="def pytest_wirecheck_placements(topology, placements):\n"
                                          "    placements.append(placements[0])\n")
    result = run_suite(pytester, "--simulate=h200-sxm-2", "--collect-only", "tests/test_topology.py")
    assert result.ret == 4
    result.stderr.fnmatch_lines(["*pytest_wirecheck_placements left placement ids twice: single-1gpu-0*"])
