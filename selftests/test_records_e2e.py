"""Records, verdicts and first contact, as an operator meets them (simulation on this CPU).

A record file re-judged by `wirecheck judge` gives the run's verdicts, and fails when a floor
is raised; the nightly command passes on its first night and compares on the second; option
values that are existing paths parse; a simulated run never reads as an accepted node.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from e2e import PROJECT, make_project, pythonpath, records, run_suite, thresholds_with
from wirecheck.cli.judge import main as judge
from wirecheck.core.exit_codes import FAILED as EXIT_FAILED, SIMULATED as EXIT_SIMULATION
from wirecheck.thresholds.file import load_thresholds
from wirecheck.vocab.ops import OPS
from wirecheck.vocab.strategies import SINGLE_GPU_PREPARED_IN_LOAD
from wirecheck.vocab.work import BENCHMARK_FIRST_ROUND_SWEPT, BENCHMARK_SWEPT_ONLY

BUSBW = ("-k", "test_busbw and nvswitch")


def _verdicts(path: Path) -> dict[str, str]:
    return {r["test"]: r["outcome"] for r in records(path) if r["type"] == "verdict"}


def test_judge_gives_the_runs_verdicts_and_fails_a_raised_floor(pytester, capsys):
    root = make_project(pytester)
    out = root / "run.jsonl"
    result = run_suite(pytester, "--simulate=h200-sxm-2", *BUSBW, f"--wirecheck-json={out}", "--benchmark-disable")
    n = len(OPS)  # test_busbw on nvswitch-2gpu-0.1: one per op
    result.assert_outcomes(passed=n)
    recorded = _verdicts(out)
    assert len(recorded) == n and set(recorded.values()) == {"pass"}
    lines = records(out)
    assert lines[0]["type"] == "run" and lines[0]["simulated"] is True
    assert lines[-1]["type"] == "end" and lines[-1]["status"] == "complete" and lines[-1]["tests"] == {"passed": n}

    assert judge([str(out), "--thresholds", str(root / "thresholds.yaml")]) == EXIT_SIMULATION
    text = capsys.readouterr().out
    assert f"0 failed, {n} passed" in text and "0 changed since recorded" in text and "SIMULATION" in text

    def raise_all_reduce(data):
        data["collectives"]["simulated_floors"]["all_reduce"] = {"any": {"min": "5000 GB/s", "source": "selftest: raised"}}

    raised = root / "raised.yaml"
    raised.write_text(thresholds_with(raise_all_reduce))
    assert judge([str(out), "--thresholds", str(raised), "-v"]) == EXIT_FAILED
    text = capsys.readouterr().out
    assert f"1 failed, {n - 1} passed" in text
    failure = next(line for line in text.splitlines() if line.startswith("FAIL"))
    assert "busbw" in failure and "nvswitch-2gpu-0.1" in failure and "floor 5000.0 GB/s" in failure
    assert "selftest: raised" not in failure  # the limit's source: -v says it once, below
    assert "  raised.yaml: collectives.simulated_floors.all_reduce.any: selftest: raised" in text.splitlines(), text
    assert "was pass when recorded" in text


def test_judge_refuses_what_is_not_a_record(tmp_path, capsys):
    bogus = tmp_path / "notes.jsonl"
    bogus.write_text('{"hello": 1}\n')
    assert judge([str(bogus)]) == 2
    assert "not a wirecheck record file" in capsys.readouterr().err


def test_a_run_cut_short_fails_judgement(pytester, capsys, healthy_busbw_runs):
    root = make_project(pytester)
    result, out = healthy_busbw_runs[0]  # `-k "test_busbw and all_reduce and nvswitch"`, shared (conftest.py)
    result.assert_outcomes(passed=1)
    cut = root / "cut.jsonl"
    cut.write_text("".join(line + "\n" for line in out.read_text().splitlines()[:-1]))  # no end record
    assert judge([str(cut), "--thresholds", str(root / "thresholds.yaml")]) == EXIT_FAILED
    assert "cut short" in capsys.readouterr().out


NIGHTLY = ("--benchmark-autosave", "--benchmark-compare", "--benchmark-compare-fail=median:10%")


def test_nightly_command_runs_on_the_first_night_and_compares_on_the_second(pytester):
    make_project(pytester)
    selection = ("-k", "test_busbw and all_reduce and nvswitch")
    record = pytester.path / "first.jsonl"
    first = run_suite(pytester, "--simulate=h200-sxm-2", *selection, *NIGHTLY, "--benchmark-save-data",
                      f"--wirecheck-json={record}")
    first.assert_outcomes(passed=1)
    first.stdout.fnmatch_lines(["*first night: no saved benchmark run*this run's benchmark rounds are saved as the "
                                "first (a level that times none, as quick, saves nothing*"])
    saved = list(Path(pytester.path, ".benchmarks", "simulated").rglob("*.json"))
    assert len(saved) == 1, "a simulated run is saved apart from hardware history"
    bench = json.loads(saved[0].read_text())["benchmarks"][0]
    assert bench["options"]["timer"].endswith("wirecheck_device_clock") and bench["stats"]["rounds"] >= 2
    # The first round is the sweep's own calls at the floor size (their slowest rank's eager time, `iters` of them),
    # which the record holds; the later rounds are measured anew, so they are other figures.
    lines = records(record)
    settings = load_thresholds(pytester.path / "thresholds.yaml").collective_settings(True)
    (floor,) = [x["details"] for x in lines if x["type"] == "measurement" and x.get("kind") == "collective"
                and x["details"]["requested_bytes"] == settings.floor_size]
    assert lines[0]["benchmark"] == BENCHMARK_FIRST_ROUND_SWEPT
    assert lines[0]["single_gpu"] == SINGLE_GPU_PREPARED_IN_LOAD  # the plan prices a one-GPU node's training by it
    assert bench["stats"]["rounds"] == settings.benchmark_rounds
    assert bench["stats"]["data"][0] == pytest.approx(floor["eager_time_s"] * settings.iters, rel=1e-12)
    assert all(later != bench["stats"]["data"][0] for later in bench["stats"]["data"][1:]), bench["stats"]["data"]
    second = run_suite(pytester, "--simulate=h200-sxm-2", *selection, *NIGHTLY)
    second.assert_outcomes(passed=1)
    assert "first night" not in second.stdout.str()
    second.stdout.fnmatch_lines(["*comparisons shown, not judged*"])
    assert "Comparing against benchmarks from" in second.stdout.str() + second.stderr.str()


BENCHMARK_DEFAULTS = {"benchmark_save": None, "benchmark_autosave": False, "benchmark_json": None,
                      "benchmark_compare": None, "benchmark_histogram": [], "benchmark_csv": [],
                      "benchmark_disable": False, "benchmark_enable": False}


@pytest.mark.parametrize("given, kept", [
    ({}, False),
    ({"benchmark_autosave": True}, True),
    ({"benchmark_save": "night"}, True),
    ({"benchmark_json": "out.json"}, True),
    ({"benchmark_compare": True}, True),  # a first night's compare is dropped before (nightly.configure)
    ({"benchmark_histogram": ["h"]}, True),
    ({"benchmark_csv": ["c"]}, True),
    ({"benchmark_autosave": True, "benchmark_disable": True}, False),  # pytest-benchmark runs each call once
    ({"benchmark_json": "out.json", "benchmark_disable": True, "benchmark_enable": True}, True),
])
def test_which_options_keep_benchmark_rounds(given, kept):
    from argparse import Namespace

    from pytest_wirecheck.nightly import rounds, rounds_kept

    option = Namespace(**{**BENCHMARK_DEFAULTS, **given})
    assert rounds_kept(option) is kept
    assert rounds(option, 3) == (3 if kept else 1)
    assert rounds_kept(Namespace(verbose=0)) is False  # pytest-benchmark is not loaded (-p no:benchmark)


def test_a_run_that_keeps_no_benchmark_round_measures_none_anew(pytester):
    """Without an option that keeps or compares pytest-benchmark's rounds, test_busbw's one round is its sweep's own
    floor-size calls: nothing is measured again for a table only -v shows, and the header says so, for the plan.
    With --benchmark-autosave (the nightly test above) every round is made, the first the sweep's."""
    make_project(pytester)
    record = pytester.path / "run.jsonl"
    result = run_suite(pytester, "--simulate=h200-sxm-2", "-k", "test_busbw and all_reduce and nvswitch", "-v",
                       "--benchmark-columns=rounds", f"--wirecheck-json={record}")
    result.assert_outcomes(passed=1)
    result.stdout.re_match_lines([r"test_busbw\[nvswitch-2gpu-0\.1-all_reduce\]\s+1\s*$"])
    assert records(record)[0]["benchmark"] == BENCHMARK_SWEPT_ONLY


def test_option_values_that_are_existing_paths(pytester, tmp_path_factory):
    """`--wirecheck-json PATH` and `--simulate FILE` with a space, each an existing file outside the
    project: pytest must not take them for test paths and move its rootdir there (it chooses the
    rootdir before plugin options are known; the plugin chooses again once they are)."""
    root = make_project(pytester)
    elsewhere = tmp_path_factory.mktemp("logs")
    existing = elsewhere / "x.jsonl"
    existing.write_text("")
    topo = elsewhere / "node.txt"
    topo.write_text((PROJECT / "fixtures" / "pytest_wirecheck" / "topologies" / "h200-sxm-2.txt").read_text())
    result = run_suite(pytester, "--simulate", str(topo), "-k", "inventory", "--wirecheck-json", str(existing))
    assert result.ret == 10, result.stdout.str() + result.stderr.str()
    result.stdout.fnmatch_lines(["*SIMULATION on *node.txt*", f"rootdir: {root}"])
    assert "tests/test_inventory.py" in result.stdout.str()
    assert [r["type"] for r in records(existing)][0] == "run"


def test_simulation_passes_no_inventory_check_and_says_so_last(pytester):
    make_project(pytester)
    result = run_suite(pytester, "--simulate=h200-nvl-8", "tests/test_inventory.py", "--profile", "h200-nvl-8", "-rs")
    outcomes = result.parseoutcomes()
    assert outcomes.get("passed", 0) == 0 and outcomes["skipped"] > 0, outcomes
    assert "simulation: the inventory is read from the live node only" in result.stdout.str()
    assert result.outlines[-1].startswith("wirecheck: SIMULATION of"), result.outlines[-3:]


def test_an_unwritable_record_path_is_a_usage_error(pytester):
    make_project(pytester)
    result = run_suite(pytester, "--simulate", "-k", "inventory", "--wirecheck-json=/proc/wirecheck/x.jsonl")
    assert result.ret == 4
    assert "--wirecheck-json: cannot write the record file /proc/wirecheck/x.jsonl" in result.stderr.str()
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()


INTERRUPT = '''
import pytest

@pytest.fixture
def collective_worker():
    raise KeyboardInterrupt
'''


def test_an_interrupted_run_keeps_its_records_and_says_so(pytester):
    root = make_project(pytester, tests_conftest=INTERRUPT)
    out = root / "run.jsonl"
    result = run_suite(pytester, "--simulate=h200-sxm-2", "-k", "nvswitch", f"--wirecheck-json={out}", "--benchmark-disable")
    assert result.ret == 130  # Ctrl-C's code, as wirecheck validate returns it (pytest's own would be 2)
    end = records(out)[-1]
    assert end["type"] == "end" and end["status"] == "interrupted"
    assert end["signal"] == "SIGINT" and end["exit_status"] == 130


def test_a_run_of_a_part_of_the_checks_says_so_and_options_that_drop_checks_are_refused(pytester):
    """`--lf` re-ran the failed checks alone and its record read as the selection's whole run, which
    `--trust-recent` would let stand for the prolog's (here a -k is there too; alone, the header said []); `--benchmark-skip` skipped every busbw floor and passed
    the node on the rest, `--benchmark-only` the reverse."""
    from wirecheck.records import trust
    from wirecheck.records.file import read_run

    raised = thresholds_with(lambda d: d["collectives"]["simulated_floors"].update(
        {"all_reduce": {"any": {"min": "5000 GB/s", "source": "raised for this test"}}}))
    make_project(pytester, raised)
    selection = ("-k", "test_busbw and nvswitch and (all_reduce or broadcast) and not axis")
    pytester._monkeypatch.setenv("PYTHONPATH", pythonpath())
    first = pytester.runpytest_subprocess("--simulate=h200-sxm-2", *selection, timeout=600)
    first.assert_outcomes(passed=1, failed=1)
    (pytester.path / "thresholds.yaml").write_text((PROJECT / "thresholds.yaml").read_text())
    record = pytester.path / "lf.jsonl"
    again = pytester.runpytest_subprocess("--simulate=h200-sxm-2", *selection, "--lf", f"--wirecheck-json={record}",
                                          timeout=600)
    again.assert_outcomes(passed=1)
    run = read_run(record)
    assert trust.summary(run).selection == ("-k test_busbw and nvswitch and (all_reduce or broadcast) and not axis",
                                            "--lf")
    for option, said in (("--benchmark-skip", "skips test_busbw and test_throughput"),
                         ("--benchmark-only", "skips every check but test_busbw and test_throughput")):
        refused = run_suite(pytester, "--simulate=h200-sxm-2", *selection, option)
        assert refused.ret == 4, refused.stdout.str()
        assert said in refused.stderr.str() + refused.stdout.str()


def test_a_nightly_regression_is_taken_from_pytest_benchmark_into_the_run(monkeypatch):
    """pytest-benchmark raises --benchmark-compare-fail's regressions from its terminal summary, after the record's
    end said 0, and the run ended on a traceback with Python's 1. They are taken at the session's finish (its
    comparison is made by then): the record and the exit status fail on them, and nothing is raised later."""
    from types import SimpleNamespace

    from pytest_wirecheck.nightly import take_regressions

    session = SimpleNamespace(performance_regressions=[("test_busbw[nvswitch-2gpu-0.1-all_reduce]",
                                                         "Field 'median' has failed PercentageRegressionCheck: 12.3 > 10")])
    config = SimpleNamespace(_benchmarksession=session)
    assert take_regressions(config) == ["test_busbw[nvswitch-2gpu-0.1-all_reduce]: Field 'median' has failed "
                                        "PercentageRegressionCheck: 12.3 > 10"]
    assert session.performance_regressions == []  # pytest-benchmark's check_regressions finds none to raise
    assert take_regressions(SimpleNamespace()) == []  # pytest-benchmark not loaded


@pytest.mark.parametrize("args, said", [(("-n", "2"), "-n (pytest-xdist): the suite measures the node's GPUs"),
                                        (("-p", "no:benchmark"), "pytest-benchmark is not loaded")])
def test_plugins_the_suite_cannot_run_with_are_refused(pytester, args, said):
    """pytest -n 2 ran each test file's sweeps in two processes at once, kept three records and none held the
    run's failures; -p no:benchmark made test_busbw error on its missing fixture, read as a failed check (exit 1,
    a drained node). Both are usage errors now (exit 4), before any record is made."""
    make_project(pytester)
    result = run_suite(pytester, "--simulate=h200-sxm-2", "-k", "test_gpus_visible", *args)
    assert result.ret == 4, result.stdout.str() + result.stderr.str()
    assert said in result.stdout.str() + result.stderr.str()
    assert not list(pytester.path.glob(".wirecheck/*.jsonl"))


def test_junit_xml_says_a_simulation_is_one(pytester):
    """accept.xml from `pytest --simulate --junitxml` looked like a hardware acceptance to a CI dashboard: only the
    exit code (10) told them apart. Its testsuite's properties say SIMULATION, of what, the GPUs and the level."""
    import xml.etree.ElementTree as ET

    make_project(pytester)
    result = run_suite(pytester, "--simulate=h200-sxm-2", "-k", "test_gpus_visible", "--junitxml=accept.xml")
    assert result.ret == 10, result.stdout.str()
    suite = ET.parse(pytester.path / "accept.xml").getroot().find("testsuite")
    props = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert props["wirecheck_simulated"] == "true" and props["wirecheck_simulation_of"].endswith("h200-sxm-2.txt")
    assert props["wirecheck_gpus"] == "2" and props["wirecheck_level"] == "acceptance"


def test_a_run_stopped_by_maxfail_says_the_rest_did_not_run(pytester):
    """-x stopped the run at its first failure and the record's end said `complete` beside the checks that never
    ran; the end line and the last lines now say pytest stopped early."""
    raised = thresholds_with(lambda d: d["collectives"]["simulated_floors"].update(
        {"all_reduce": {"any": {"min": "5000 GB/s", "source": "raised for this test"}}}))
    make_project(pytester, raised)
    record = pytester.path / "x.jsonl"
    result = run_suite(pytester, "--simulate=h200-sxm-2", "-k", "test_busbw and nvswitch and not axis", "-x",
                       f"--wirecheck-json={record}")
    assert result.ret == 1
    assert records(record)[-1]["stopped_early"] == "stopping after 1 failures"
    result.stdout.fnmatch_lines(["wirecheck: pytest stopping after 1 failures (-x / --maxfail): the checks after it "
                                 "did not run"])
