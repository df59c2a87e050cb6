"""What an operator reads at the end of a run: a failed check is one block (check, where,
measured, limit, source, what it means, what to do) and its short summary line says why; any other
error keeps pytest's traceback; the last lines name the record and the next command."""

from __future__ import annotations

from xml.etree import ElementTree

from e2e import PROJECT, make_project, records, run_suite
from wirecheck import checks
from wirecheck.checks.words import GENERIC, WORDS, words_for
from wirecheck.checks.failure_block import reason, render
from wirecheck.core.verdict import Verdict
from wirecheck.thresholds.file import load_thresholds

from pytest_wirecheck.last_screen import asserted_verdict


def _slow_busbw():
    """A real check's verdict: 1 MB/s all_reduce against the simulated floor of 0.005 GB/s."""
    return checks.collectives.busbw(
        load_thresholds(PROJECT / "thresholds.yaml"), op="all_reduce", placement="nvswitch-2gpu-0.1",
        placement_class="nvswitch", n_gpus=2, simulated=True, busbw_bytes_per_s=1e6, size_bytes=2**22,
        link_ceiling_bytes_per_s=None)


def test_the_block_says_what_where_measured_limit_meaning_and_what_to_do_in_a_few_lines():
    verdict = _slow_busbw()
    lines = render(verdict, "tests/test_collectives.py::test_busbw[nvswitch-2gpu-0.1-all_reduce]")
    text = "\n".join(lines)
    assert lines[0] == "busbw FAILED on nvswitch-2gpu-0.1: all_reduce busbw at 4 MiB", lines[0]
    assert "  measured  0.001 GB/s, 80 % below" in lines, text  # by how much
    assert ("  limit     >= 0.005 GB/s (simulated limit; thresholds.yaml: collectives.simulated_floors.all_reduce.any)"
            in lines), text  # the rule that made it, where it is written
    assert f"  means     {WORDS['busbw'].means}" in lines and f"  to do     {WORDS['busbw'].todo}" in lines
    assert "  code      WC2021 (docs/failure-codes.md)" in lines
    # the limit's provenance (its source) is the limit's, said once with -v: not in the block, nor twice
    assert "CPU gloo sanity floor" not in text and "source" not in text
    assert len(lines) <= 8, text
    assert reason(verdict) == "busbw 0.001 < 0.005 GB/s"  # short: pytest cuts it at the terminal's width


def test_a_figure_measured_beside_another_process_says_so_not_that_the_gpu_is_slow():
    verdict = Verdict("hbm_bandwidth", "HBM copy bandwidth", "GPU0", "fail", "measured 1900.5 GB/s while other "
                      "processes computed on the GPU (pid 915 (python3))", measured=1900.5, unit="GB/s",
                      details={"foreign_processes": [[915, "python3", 916455424]]})
    text = "\n".join(render(verdict))
    assert f"means     {WORDS['no_foreign_processes'].means}" in text and WORDS["hbm_bandwidth"].means not in text
    assert "limit" not in text  # no limit was judged: none is shown


def test_every_check_of_the_suite_says_what_a_failure_means():
    missing = sorted(set(checks.CHECKS) - set(WORDS))
    assert not missing, f"declare the Words of: {missing}"
    assert words_for("a_site_check") == GENERIC


def test_only_the_assertion_of_a_failed_verdict_is_a_verdict_failure():
    failed = _slow_busbw()
    passed = Verdict("gpu_count", "GPU count", None, "pass", "8 GPUs as expected")
    recorded = [passed, failed]
    error = AssertionError("whatever pytest made of the message")  # its words are never read
    assert asserted_verdict(recorded, error, "assert verdict.ok, verdict.message", {"verdict": failed}) is failed
    assert asserted_verdict(recorded, error, "    assert self.v.ok, self.v.message\n",
                            {"self": type("T", (), {"v": failed})()}) is failed  # names and attributes
    # the same words, but another object than the recorded one: not that verdict
    twin = Verdict(**{k: getattr(failed, k) for k in ("check", "what", "where", "outcome", "message")})
    assert asserted_verdict(recorded, error, "assert verdict.ok, verdict.message", {"verdict": twin}) is None
    assert asserted_verdict(recorded, error, "assert (1 + 1) == 3", {"verdict": failed}) is None  # another assertion
    assert asserted_verdict(recorded, error, "assert record(x).ok", {"record": lambda x: failed}) is None  # no call
    assert asserted_verdict(recorded, RuntimeError(failed.message), "assert verdict.ok",
                            {"verdict": failed}) is None  # an error is never a verdict
    assert asserted_verdict(recorded, error, "assert verdict.ok", {"verdict": passed}) is None
    assert asserted_verdict(recorded, error, "", {}) is None  # no source to read: pytest's report stays


SCREEN_TESTS = '''
import pytest

from wirecheck import checks
from wirecheck.core.verdict import Verdict

pytestmark = pytest.mark.stage("measure", order=9)


def test_a_check_fails(node, record):
    verdict = record(checks.collectives.busbw(
        node.thresholds, op="all_reduce", placement="nvswitch-2gpu-0.1", placement_class="nvswitch", n_gpus=2,
        simulated=node.simulated, busbw_bytes_per_s=1e6, size_bytes=2**22, link_ceiling_bytes_per_s=None))
    assert verdict.ok, verdict.message


def test_the_harness_breaks(record):
    record(Verdict("busbw", "x", "nowhere", "fail", "a recorded failure"))
    raise RuntimeError("the harness broke here")


def test_another_assertion(record):
    record(Verdict("busbw", "x", "nowhere", "fail", "a recorded failure"))
    assert 1 + 1 == 3


def test_another_assertion_of_a_failed_verdict(record):
    verdict = record(Verdict("busbw", "x", "nowhere", "fail", "a recorded failure"))
    assert verdict.where == "elsewhere", verdict.message
'''


def test_a_failed_check_is_one_block_and_errors_keep_their_traceback(pytester):
    root = make_project(pytester)
    (root / "tests" / "test_zz_screen.py").write_text(SCREEN_TESTS)
    junit = root / "accept.xml"
    result = run_suite(pytester, "--simulate=h200-sxm-2", "tests/test_zz_screen.py", f"--junitxml={junit}")
    out = result.stdout.str()
    assert result.ret == 1, out
    block = out[out.index("_ test_a_check_fails _"):out.index("_ test_the_harness_breaks _")]
    assert "busbw FAILED on nvswitch-2gpu-0.1: all_reduce busbw at 4 MiB" in block
    for line in ("measured  0.001 GB/s", "limit     >= 0.005 GB/s",
                 f"means     {WORDS['busbw'].means}", "to do     compare `wirecheck topo`"):
        assert line in block, block
    # no test source, no fixture reprs, no AssertionError: the block only
    assert "def test_a_check_fails" not in block and "Verdict(" not in block and "AssertionError" not in block, block
    assert "FAILED tests/test_zz_screen.py::test_a_check_fails - busbw 0.001 < 0.005 GB/s" in out, out
    # a real error of the harness, and an assertion that is no verdict's, keep pytest's own report
    assert 'raise RuntimeError("the harness broke here")' in out and "RuntimeError: the harness broke here" in out
    assert "assert (1 + 1) == 3" in out
    assert "assert 'nowhere' == 'elsewhere'" in out  # a failed verdict's words, but not its `ok` asserted
    failure = ElementTree.parse(junit).find(".//testcase[@name='test_a_check_fails']/failure")
    assert failure.get("message") == "busbw 0.001 < 0.005 GB/s" and "means " in failure.text
    last = [line for line in result.outlines if line.strip()][-3:]
    assert last[0].startswith("wirecheck: record .wirecheck/results-") and "4 failed" in last[0], last
    assert last[1].startswith("wirecheck: next: wirecheck report .wirecheck/results-"), last
    assert last[2].startswith("wirecheck: SIMULATION of"), last


def test_a_run_that_read_no_gpu_and_skipped_everything_is_not_accepted(pytester, monkeypatch):
    """`pytest -m health` on a node whose NVML reads nothing (no --simulate): every selected check skips and
    test_gpus_visible, which would fail, is not selected. That is no accepted node: exit 11, said last."""
    from wirecheck.node import nvml

    def no_nvml():
        raise nvml.NvmlUnavailable("NVML could not start (NVMLError_DriverNotLoaded: Driver Not Loaded)")

    monkeypatch.setattr(nvml, "read_topology", no_nvml)
    root = make_project(pytester)
    record = pytester.path / "run.jsonl"
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "-m", "health", f"--wirecheck-json={record}",
                                          f"{root}/tests/test_gpu_health.py")
    text = "\n".join(result.outlines)
    assert result.ret == 11, text
    assert result.outlines[-1].startswith("wirecheck: NO GPU was validated, every selected check skipped (exit 11, "
                                          "not 0): NVML could not start (NVMLError_DriverNotLoaded"), text
    assert records(record)[-1]["exit_status"] == 11
    # --collect-only runs nothing: it said "every selected check skipped"
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "-m", "health", "--collect-only",
                                          f"{root}/tests/test_gpu_health.py")
    assert result.ret == 11 and result.outlines[-1].startswith(
        "wirecheck: NO GPU was validated, nothing ran (--collect-only) (exit 11, not 0)"), "\n".join(result.outlines)
    # with the check that names the missing GPUs selected, the run fails as before: 1, not 11
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", f"--wirecheck-json={pytester.path / 'all.jsonl'}",
                                          f"{root}/tests/test_inventory.py")
    assert result.ret == 1, "\n".join(result.outlines)


def test_the_record_line_says_why_its_skips_are_fewer_than_pytests():
    """The last screen said "364 passed, 474 skipped", then "364 passed, 211 skipped checks" with no word
    on the 263 between: tests that skipped before their check ran record no verdict."""
    from collections import Counter
    from types import SimpleNamespace

    from pytest_wirecheck.last_screen import final_lines

    writer = SimpleNamespace(ended=True, verdicts=Counter({"pass": 364, "skip": 211}))
    reporter = SimpleNamespace(kept=True, writer=writer, file=SimpleNamespace(path=PROJECT / "r.jsonl"),
                               stopped_by=None, unavailable=None, simulated=False, exit_status=0,
                               tests=Counter({"passed": 364, "skipped": 474}),
                               skips_without_verdict=Counter({"needs live NVML": 68, "no --profile given": 195}))
    line = final_lines(reporter)[0][0]
    assert line.endswith(": 0 failed, 364 passed, 211 skipped checks (pytest's 474 skipped tests include 263 that "
                         "skipped before their check ran and recorded none; `wirecheck judge` says why)"), line
    reporter.tests, reporter.skips_without_verdict = Counter({"passed": 364, "skipped": 211}), Counter()
    assert final_lines(reporter)[0][0].endswith(": 0 failed, 364 passed, 211 skipped checks")  # the counts agree


def test_the_record_line_tells_a_measurement_that_broke_by_its_problem_kind():
    """A failed verdict whose problem kind says the figure was never measured (a hang, a crash: core.problems)
    is counted apart from the figures judged against a limit; the kind is read, never the verdict's words."""
    from collections import Counter
    from types import SimpleNamespace

    from pytest_wirecheck.last_screen import final_lines

    writer = SimpleNamespace(ended=True, verdicts=Counter({"fail": 3, "pass": 5}))
    reporter = SimpleNamespace(kept=True, writer=writer, file=SimpleNamespace(path=PROJECT / "r.jsonl"),
                               stopped_by=None, unavailable=None, simulated=False, exit_status=1, tests=Counter(),
                               skips_without_verdict=Counter(), failed_kinds=Counter({"broken": 1, "not_measured": 1}))
    line = final_lines(reporter)[0][0]
    assert ": 3 failed (2 not measured: a hang, a crash or a missing figure), 5 passed" in line, line
    reporter.failed_kinds = Counter()
    assert ": 3 failed, 5 passed" in final_lines(reporter)[0][0]
