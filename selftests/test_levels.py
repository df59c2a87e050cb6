"""Levels (docs/levels.md): each level's selection of the one set of tests, collected in simulation; the
options' errors; `wirecheck validate --level`; the record's level and test seconds; the GPU load at
the run's level."""

from __future__ import annotations

import re
from collections import Counter

from types import SimpleNamespace

import pytest

from e2e import make_project, records, run_suite
from pytest_wirecheck.gpu_health import GpuLoadSession
from wirecheck.cli import validate as cli_validate
from wirecheck.cli.foreground import Outcome
from wirecheck.cli.main import main
from wirecheck.core import exit_codes
from wirecheck.core.levels import LEVELS, check_level, thresholds_key
from wirecheck.core.paths import suite_paths
from wirecheck.core.quantity import QuantityError, parse_duration
from wirecheck.node.placement import COLLECTIVE_CLASSES
from wirecheck.node.topo_text import load_recorded
from wirecheck.thresholds.file import load_thresholds

QUICK_ALL_REDUCE = ("test_large_all_reduce_correct", "test_large_all_reduce_busbw")


def _collected(pytester, *args) -> tuple[list[str], str]:
    result = run_suite(pytester, "--collect-only", "-q", *args)
    ids = [line for line in result.outlines if "::" in line]
    return ids, result.stdout.str() + result.stderr.str()


def _function(test_id: str) -> str:
    return test_id.split("::")[1].split("[")[0]


def _param(test_id: str) -> str:
    return test_id.split("[", 1)[1].rstrip("]")


# ---- the vocabulary ------------------------------------------------------------------------------


def test_levels_and_their_thresholds_keys():
    assert LEVELS == ("quick", "acceptance", "burn-in")
    assert [thresholds_key(level) for level in LEVELS] == ["quick", "acceptance", "burn_in"]
    with pytest.raises(ValueError, match=r"--level 'fast': unknown level; choose one of quick, acceptance, burn-in"):
        check_level("fast")


@pytest.mark.parametrize("text, seconds", [("4h", 14400.0), ("30min", 1800.0), ("90 s", 90.0), ("1.5 h", 5400.0),
                                           ("5m", 300.0), ("1h30m", 5400.0), ("1h 30min", 5400.0), ("90s", 90.0),
                                           ("4 hours", 14400.0), ("2d", 172800.0)])
def test_duration_parser(text, seconds):
    assert parse_duration(text, "--duration") == seconds


@pytest.mark.parametrize("text, said", [("4", 'no unit; a bare duration is most likely seconds: write "4 s"'),
                                        ("4 fortnights", 'unknown unit "fortnights"'), ("0 s", "no time at all"),
                                        ("-5m", "--duration -5m: a duration cannot be negative"),
                                        ("1e999h", "not a finite duration"), ("1h-5m", "is not a duration")])
def test_duration_parser_refuses(text, said):
    with pytest.raises(QuantityError, match=re.escape(said)):
        parse_duration(text, "--duration")


# ---- each level's selection ----------------------------------------------------------------------


def test_quick_runs_one_large_all_reduce_per_class_and_no_training(pytester):
    make_project(pytester)
    ids, out = _collected(pytester, "--simulate=h200-nvl-8", "--level", "quick")
    functions = Counter(_function(i) for i in ids)
    modules = {i.split("::")[0] for i in ids}
    assert "tests/test_strategies.py" not in modules and "tests/test_copy_bandwidth.py" not in modules, modules
    # the collective module runs only the quick all_reduce: one placement per class, the largest
    collective = [i for i in ids if i.startswith("tests/test_collectives.py::")]
    assert {_function(i) for i in collective} == set(QUICK_ALL_REDUCE), collective
    for name in QUICK_ALL_REDUCE:
        placements = [_param(i) for i in collective if _function(i) == name]
        classes = [p.split("-")[0] for p in placements]
        assert sorted(classes) == sorted(set(classes)), placements  # one per class
        assert set(classes) == {"nvl_pair", "nvl_quad", "cross_quad", "forced_pcie"} <= set(COLLECTIVE_CLASSES)
        assert "cross_quad-8gpu-0.1.2.3.4.5.6.7" in placements and "nvl_quad-4gpu-0.1.2.3" in placements
    # NCCL's path on the same placements; inventory, links, counters and every GPU check are there
    assert sorted(_param(i) for i in ids if _function(i) == "test_nccl_path") == sorted(
        _param(i) for i in collective if _function(i) == QUICK_ALL_REDUCE[0])
    for needed in ("test_gpus_visible", "test_nvlinks_per_gpu", "test_error_counters_did_not_grow",
                   "test_sustained_load_throughput", "test_memory_pattern", "test_no_xid_during_run"):
        assert functions[needed], needed
    assert re.search(r"\d+/\d+ tests collected \(\d+ deselected\)", out), out


def test_acceptance_is_the_default_and_leaves_out_the_quick_all_reduce(pytester):
    make_project(pytester)
    default, _ = _collected(pytester, "--simulate=h200-sxm-2")
    named, _ = _collected(pytester, "--simulate=h200-sxm-2", "--level", "acceptance")
    assert default == named
    functions = {_function(i) for i in default}
    assert not functions & set(QUICK_ALL_REDUCE)
    assert {"test_steps_complete", "test_busbw", "test_host_copy", "test_nccl_path"} <= functions


def test_burn_in_needs_a_duration_and_selects_its_loop_with_the_gpu_figures_and_the_counters(pytester):
    make_project(pytester)
    missing = run_suite(pytester, "--simulate=h200-sxm-2", "--level", "burn-in", "--collect-only")
    assert missing.ret == 4
    assert "--level burn-in needs --duration: how long to keep the node under load, e.g. --duration 4h" in \
        missing.stderr.str()
    ids, _ = _collected(pytester, "--simulate=h200-sxm-2", "--level", "burn-in", "--duration", "30min")
    functions = {_function(i) for i in ids}
    assert {"test_burn_in_without_hard_fault", "test_burn_in_sustained_throughput", "test_burn_in_memory_pattern",
            "test_burn_in_busbw", "test_burn_in_busbw_spread", "test_gemm_throughput", "test_gpus_visible",
            "test_error_counters_did_not_grow", "test_no_xid_during_run"} <= functions
    # the one-shot load and sweep are judged by the burn-in over all its rounds instead
    assert not functions & {"test_sustained_load_throughput", "test_memory_pattern", "test_busbw",
                            "test_result_correct", "test_steps_complete", "test_host_copy", *QUICK_ALL_REDUCE}
    acceptance, _ = _collected(pytester, "--simulate=h200-sxm-2")
    assert not {_function(i) for i in acceptance if "test_burn_in" in i}


@pytest.mark.parametrize("args, said", [
    (("--duration", "4h"), "--duration 4h: only a burn-in runs for a duration"),
    (("--level", "burn-in", "--duration", "4 fortnights"), '--duration: "4 fortnights" has an unknown unit "fortnights"'),
    (("--level", "fast"), "argument --level: invalid choice: 'fast' (choose from 'quick', 'acceptance', 'burn-in')"),
])
def test_level_and_duration_mistakes_are_usage_errors(pytester, args, said):
    make_project(pytester)
    result = run_suite(pytester, "--simulate=h200-sxm-2", "--collect-only", *args)
    assert result.ret == 4, result.stdout.str()
    assert said in result.stderr.str(), result.stderr.str()


def test_quick_with_k_nvl_quad(pytester):
    """`pytest --level quick -k nvl_quad`: the quad's quick checks only."""
    make_project(pytester)
    ids, _ = _collected(pytester, "--simulate=h200-nvl-8", "--level", "quick", "-k", "nvl_quad")
    assert ids == ["tests/test_collectives.py::test_large_all_reduce_correct[nvl_quad-4gpu-0.1.2.3]",
                   "tests/test_collectives.py::test_large_all_reduce_busbw[nvl_quad-4gpu-0.1.2.3]",
                   "tests/test_nccl_path.py::test_nccl_path[nvl_quad-4gpu-0.1.2.3]"]


def test_a_selection_outside_the_level_says_so(pytester):
    make_project(pytester)
    result = run_suite(pytester, "--simulate=h200-sxm-2", "--level", "quick", "-k", "staircase", "--collect-only")
    assert result.ret == 4
    assert "-k 'staircase' at --level quick selected none of the collected tests: -k 'staircase' matches 2 test(s) " \
           "outside the quick level" in result.stderr.str(), result.stderr.str()


SITE_TESTS = '''
import pytest

def test_site_rack_label(record):
    assert True

@pytest.mark.levels("quick")
def test_site_quick_only():
    assert True

@pytest.mark.levels("quick", "nightly")
def test_site_bad_level():
    assert True
'''


def test_a_test_without_levels_runs_at_acceptance_and_burn_in_and_a_bad_level_is_named(pytester):
    root = make_project(pytester)
    (root / "tests" / "test_site.py").write_text(SITE_TESTS.replace('@pytest.mark.levels("quick", "nightly")\n', ""))
    quick, _ = _collected(pytester, "--simulate=h200-sxm-2", "--level", "quick", "tests/test_site.py")
    acceptance, _ = _collected(pytester, "--simulate=h200-sxm-2", "tests/test_site.py")
    assert [_function(i) for i in quick] == ["test_site_quick_only"]
    assert [_function(i) for i in acceptance] == ["test_site_rack_label", "test_site_bad_level"]
    (root / "tests" / "test_site.py").write_text(SITE_TESTS)
    bad = run_suite(pytester, "--simulate=h200-sxm-2", "--collect-only", "tests/test_site.py")
    assert bad.ret == 4
    assert "test_site_bad_level: pytest.mark.levels: 'nightly': unknown level; choose one of quick, acceptance, " \
           "burn-in" in bad.stderr.str(), bad.stderr.str()


# ---- a quick run ----------------------------------------------------------------------------------


def test_a_run_records_its_level_and_each_tests_seconds(pytester):
    root = make_project(pytester)
    out = root / "run.jsonl"
    result = run_suite(pytester, "--simulate=h200-sxm-2", "--level", "quick", "-k", "gpus_visible or nvlinks_per_gpu",
                       f"--wirecheck-json={out}")
    assert result.ret == 10, result.stdout.str()  # nothing failed, in simulation
    lines = records(out)
    assert lines[0]["level"] == "quick" and lines[0]["duration_s"] is None
    durations = lines[-1]["test_durations_s"]  # every test that ran, skipped ones too
    assert set(durations) == {"tests/test_inventory.py::test_gpus_visible", "tests/test_topology.py::test_nvlinks_per_gpu[gpu0]",
                              "tests/test_topology.py::test_nvlinks_per_gpu[gpu1]"}, durations
    assert all(0 <= seconds < 60 for seconds in durations.values())


@pytest.mark.parametrize("level, seconds", [("quick", 1.0), ("acceptance", 2.0), ("burn-in", 3.0)])
def test_the_gpu_load_holds_the_sustained_load_for_the_runs_level(tmp_path, level, seconds):
    """gpu_health.simulated.sustained.duration.<level> reaches the GPU load's sustained call."""
    topology = load_recorded("h200-sxm-2", suite_paths().topologies)
    node = SimpleNamespace(topology=topology, simulated=True, thresholds=load_thresholds(suite_paths().thresholds))
    reporter = SimpleNamespace(logs_dir=tmp_path / "run-logs")
    session = GpuLoadSession(node, None, reporter, (0, 1), None, level)
    assert session.load.kwargs("sustained")["duration_s"] == seconds


def test_quick_does_not_build_the_bytecode_cache(monkeypatch):
    from wirecheck.workers import spawn

    def refuse():
        raise AssertionError("the quick level must not prepare the bytecode cache")

    monkeypatch.setattr(spawn.bytecode, "prepare", refuse)
    monkeypatch.setattr(spawn, "untrusted_import_path", lambda: [])
    assert spawn.prepare_for_workers(build=False) == []
    with pytest.raises(AssertionError, match="must not prepare"):
        spawn.prepare_for_workers(build=True)


# ---- wirecheck validate --level ------------------------------------------------------------------


def test_validate_refuses_an_unknown_level_before_running_anything(monkeypatch, capsys):
    monkeypatch.setattr(cli_validate, "run_foreground", lambda cmd, name, **_: pytest.fail("pytest must not start"))
    assert main(["validate", "--level", "fast", "-k", "inventory"]) == exit_codes.USAGE_ERROR
    out, err = capsys.readouterr()
    assert "wirecheck validate: --level 'fast': unknown level; choose one of quick, acceptance, burn-in" in err
    assert out.splitlines()[-1] == "wirecheck validate: usage error; exit 4"


def test_validate_passes_the_level_to_pytest(monkeypatch, capsys):
    started = []
    monkeypatch.setattr(cli_validate, "run_foreground", lambda cmd, name, **_: started.append(cmd) or Outcome(0, 0, False))
    assert main(["validate", "--level", "quick", "--simulate=h200-sxm-2", "-k", "inventory"]) == exit_codes.SIMULATED
    (cmd,) = started
    assert cmd[-5:] == ["--level", "quick", "--simulate=h200-sxm-2", "-k", "inventory"]
    assert "--level quick" in capsys.readouterr().err
