"""The time model (`wirecheck plan`): against the recorded 2x H200 runs, against the collected suite,
the command's output and JSON, and the unit costs file against the script that makes it."""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys
import types

import pytest

from e2e import PROJECT
from wirecheck.cli.main import main
from wirecheck.core.paths import suite_paths
from wirecheck.plan import model
from wirecheck.plan.collect import collect, from_record, suite_work
from wirecheck.plan.costs import load_unit_costs
from wirecheck.plan.model import predict
from wirecheck.thresholds.file import load_thresholds
from wirecheck.vocab.ops import OPS, feasible_sizes
from wirecheck.vocab.strategies import (LOCAL_BASELINE_ONCE_PER_GPU, SINGLE_GPU_PREPARED_IN_LOAD,
                                        TRAINER_WORKERS_PRELOADED)
from wirecheck.vocab.work import BENCHMARK_FIRST_ROUND_SWEPT, BENCHMARK_SWEPT_ONLY

REFERENCE = PROJECT / "fixtures" / "reference" / "h200-sxm-2"
WARM = [REFERENCE / "wirecheck-2026-12-01b" / f"run{i}.jsonl" for i in (1, 2, 3)]  # with the bytecode cache
COLD = [REFERENCE / d / f"run{i}.jsonl" for d in ("wirecheck-2026-11-30b", "wirecheck-2026-12-01") for i in (1, 2, 3)]
# 1x H200 acceptance runs whose copies and one-GPU training ran in the pool's one worker.
ONE_GPU = [PROJECT / "fixtures" / "reference" / "h200-1" / d / f"acceptance-{i}.jsonl"
           for d in ("level-times-2026-12-04-start", "aside-2026-12-05") for i in (1, 2, 3)]


@pytest.fixture(scope="module")
def thresholds():
    return load_thresholds(suite_paths().thresholds)


def _predicted_and_measured(path, thresholds, cold=False) -> tuple[float, float]:
    collected, end = from_record(path)
    plan = predict(collected.tests, collected.header, thresholds, load_unit_costs(cold=cold), "acceptance", str(path),
                   work=collected.work)
    return plan.total_s, end["wall_s"]


# ---- against the records -------------------------------------------------------------------------


@pytest.mark.parametrize("path", WARM + ONE_GPU, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_the_model_predicts_the_recorded_runs_within_15_percent(path, thresholds):
    predicted, measured = _predicted_and_measured(path, thresholds)
    assert abs(predicted / measured - 1) <= 0.15, (predicted, measured)


def test_runs_without_the_bytecode_cache_are_priced_with_its_figures(thresholds):
    """The six runs before the cache (259-327 s): the warm figures miss them, the cold ones do not."""
    for path in COLD:
        warm, measured = _predicted_and_measured(path, thresholds)
        cold, _ = _predicted_and_measured(path, thresholds, cold=True)
        assert warm < 0.85 * measured, (path, warm, measured)
        assert abs(cold / measured - 1) <= 0.15, (path, cold, measured)


# ---- against the collected suite ------------------------------------------------------------------


@pytest.mark.parametrize("level, topology", [("acceptance", "h200-nvl-8"), ("quick", "h100-sxm-8-nics")])
def test_the_plans_groups_hold_exactly_the_collected_tests(level, topology, thresholds):
    collected = collect(level, topology)
    plan = predict(collected.tests, collected.header, thresholds, load_unit_costs(), level, work=collected.work)
    assert sum(g.tests for g in plan.groups) == plan.tests == len(collected.tests) > 100
    keys = {(g.function, g.klass, g.n_gpus) for g in plan.groups}
    functions = {t.split("::")[1].split("[")[0] for t in collected.tests}
    assert {k[0] for k in keys} == functions
    # every test of the suite declares what it costs: a new test without its work marker fails here
    assert functions <= set(collected.work), functions - set(collected.work)
    assert not plan.unknown


def test_a_burn_in_is_priced_at_its_duration_and_every_test_of_it_is_known(thresholds):
    collected = collect("burn-in", "h200-sxm-2", ["--duration", "30min"])
    plan = predict(collected.tests, collected.header, thresholds, load_unit_costs(), "burn-in", work=collected.work)
    assert not plan.unknown
    loop = [g for g in plan.groups if g.function == "test_burn_in_without_hard_fault"]
    assert len(loop) == 1 and loop[0].work[model.K_BURN] == 30  # rounds of 60 s (and their memory tests)
    assert 1800 < loop[0].total_s < 1800 + 30 and 1800 < plan.total_s < 1800 + 120
    assert all(g.total_s < 1 for g in plan.groups if g.function.startswith("test_burn_in_busbw"))  # they read it


def test_eight_gpus_cost_more_and_quick_costs_least(thresholds):
    costs = load_unit_costs()
    totals = {}
    for level, topology in (("acceptance", "h200-sxm-2"), ("acceptance", "h100-sxm-8-nics"), ("quick", "h100-sxm-8-nics")):
        collected = collect(level, topology)
        totals[(level, topology)] = predict(collected.tests, collected.header, thresholds, costs, level,
                                            work=collected.work).total_s
    assert totals[("quick", "h100-sxm-8-nics")] < 60 < totals[("acceptance", "h200-sxm-2")] < \
        totals[("acceptance", "h100-sxm-8-nics")], totals


# ---- the model's rules on a made-up run ---------------------------------------------------------

HEADER = {"fabric": "nvswitch", "gpus": [{"index": 0}, {"index": 1}], "matrix": [["X", "NV18"], ["NV18", "X"]],
          "placements": [{"id": "nvswitch-2gpu-0.1", "class": "nvswitch", "gpus": [0, 1]},
                         {"id": "forced_pcie-2gpu-0.1", "class": "forced_pcie", "gpus": [0, 1]}]}


def test_a_sweep_is_priced_once_and_a_placement_change_starts_a_group(thresholds):
    costs = load_unit_costs()
    tests = ["tests/test_collectives.py::test_result_correct[nvswitch-2gpu-0.1-all_reduce]",
             "tests/test_collectives.py::test_half_peak_size[nvswitch-2gpu-0.1-all_reduce]",
             "tests/test_collectives.py::test_result_correct[forced_pcie-2gpu-0.1-all_reduce]",
             "tests/test_site.py::test_rack_label"]
    plan = predict(tests, HEADER, thresholds, costs, "acceptance", work=suite_work("acceptance"))
    first, reader, pcie, site = plan.groups
    sizes = thresholds.collective_settings(False).sizes_for("quick")
    assert first.work == {model.K_TEST: 1, model.K_START: 1, model.K_SIZE: len(sizes)}
    assert reader.work == {model.K_TEST: 1} and list(reader.uses) == ["test_result_correct nvswitch 2gpu"]
    assert pcie.work[model.K_START] == 1  # the shared group moved to another placement
    # the same sizes on PCIe cost more: the wire time is bytes / busbw (27 vs 326 GB/s measured)
    assert pcie.total_s - first.total_s > 1.0
    assert not site.known and plan.unknown == [site] and site.total_s == pytest.approx(costs.per_test_s)


def test_spare_workers_save_what_of_their_import_they_had_time_for(thresholds):
    costs = load_unit_costs()
    saving = costs.spare_saving_s
    assert saving and 3.0 < saving < 5.0  # new interpreter 4.60 s, from a spare 0.61 s (1x H200)
    tests = ["tests/test_collectives.py::test_result_correct[nvswitch-2gpu-0.1-all_reduce]",
             "tests/test_collectives.py::test_half_peak_size[nvswitch-2gpu-0.1-all_reduce]",
             "tests/test_collectives.py::test_result_correct[forced_pcie-2gpu-0.1-all_reduce]"]
    plans = {how: predict(tests, {**HEADER, "workers": "pool", **({"spare_workers": how} if how else {})}, thresholds,
                          costs, "acceptance", work=suite_work("acceptance")) for how in ("on", "off", None)}
    (first, reader, pcie), (first_off, _, pcie_off) = plans["on"].groups, plans["off"].groups
    # Without spares, and for a record made before them (no key), every start is a new interpreter's.
    assert first_off.seconds[model.K_START] == pcie_off.seconds[model.K_START] == costs.group_start_s
    assert plans[None].total_s == plans["off"].total_s
    # The first start: the spares started with the run, and had its start and one test's share to import.
    head_start = costs.session_start_s + costs.per_test_s
    assert first.seconds[model.K_START] == pytest.approx(costs.group_start_s - min(saving, head_start))
    # The next: its spares were started at the first start, and had that group's work and two tests' share.
    since = first.seconds[model.K_START] + first.seconds[model.K_SIZE] + 2 * costs.per_test_s
    assert pcie.seconds[model.K_START] == pytest.approx(costs.group_start_s - min(saving, since))
    assert plans["on"].total_s < plans["off"].total_s


def test_the_nccl_path_is_read_from_the_pools_log_and_a_pool_starts_only_for_an_environment_none_ran(thresholds):
    """On the pool, a path read costs its test's pytest share and starts nothing where a pool of the placement's
    environment ran before (it logged the communicator at its start); forced_pcie's read before any of its pool
    starts one. A record from before the pool priced each probe as a fresh group of its own."""
    costs = load_unit_costs()
    tests = ["tests/test_collectives.py::test_result_correct[nvswitch-2gpu-0.1-all_reduce]",
             "tests/test_nccl_path.py::test_nccl_path[nvswitch-2gpu-0.1]",
             "tests/test_nccl_path.py::test_nccl_path[forced_pcie-2gpu-0.1]"]
    pooled = predict(tests, {**HEADER, "workers": "pool"}, thresholds, costs, "acceptance", work=suite_work("acceptance"))
    collective, read, forced = pooled.groups
    assert read.work == {model.K_TEST: 1, model.K_READ: 1} and read.total_s == pytest.approx(costs.per_test_s)
    assert list(read.uses) == ["test_result_correct nvswitch 2gpu"]  # the pool it started logged the communicator
    assert forced.work == {model.K_TEST: 1, model.K_START: 1, model.K_READ: 1}  # no forced_pcie pool ran yet
    before = predict(tests, HEADER, thresholds, costs, "acceptance", work=suite_work("acceptance"))
    assert before.groups[1].seconds[model.K_PROBE] == pytest.approx(costs.nccl_probe_s)


def test_one_gpu_alone_is_priced_at_its_own_figure(thresholds):
    costs = load_unit_costs()
    assert costs.single_gpu_s is not None and costs.single_gpu_s < costs.training("nvlink", "ddp")
    header = {"fabric": "pcie", "gpus": [{"index": 0}], "matrix": [["X"]],
              "placements": [{"id": "single-1gpu-0", "class": "single", "gpus": [0]}]}
    tests = ["tests/test_strategies.py::test_single_gpu_training[single-1gpu-0]",
             "tests/test_collectives.py::test_busbw[none-all_reduce]"]  # a one-GPU node: no placement, it skips
    plan = predict(tests, header, thresholds, costs, "acceptance", work=suite_work("acceptance"))
    single, busbw = plan.groups
    assert single.seconds[model.K_RUN] == pytest.approx(costs.single_gpu_s)
    assert busbw.skips and busbw.total_s == pytest.approx(costs.per_test_s)
    without = dataclasses.replace(costs, single_gpu_s=None)
    assert predict(tests[:1], header, thresholds, without, "acceptance", work=suite_work("acceptance")).groups[0].seconds[
        model.K_RUN] == pytest.approx(costs.training("nvlink", "ddp"))


def test_on_a_one_gpu_node_the_copies_and_one_gpu_alone_run_in_the_load_pools_worker(thresholds):
    """After the GPU load (its pool over the one GPU) the copies and one GPU's training start no process: each is
    priced at its figure in the pool's worker; without those figures, or before the load, as in new workers."""
    costs = load_unit_costs()
    assert costs.one_gpu_single_s is not None and costs.one_gpu_copies_s is not None
    header = {"fabric": "pcie", "gpus": [{"index": 0}], "matrix": [["X"]], "workers": "pool",
              "placements": [{"id": "single-1gpu-0", "class": "single", "gpus": [0]}],
              "single_gpu": SINGLE_GPU_PREPARED_IN_LOAD}
    tests = ["tests/test_gpu_health.py::test_hbm_bandwidth[gpu0-copy]",
             "tests/test_copy_bandwidth.py::test_host_copy[gpu0-h2d]",
             "tests/test_strategies.py::test_single_gpu_training[single-1gpu-0]"]
    s = thresholds.copy_bandwidth.settings
    copying = (s.warmup_iters + s.iters) * 2 * s.size / costs.copy_host_bps
    load, copies, single = predict(tests, header, thresholds, costs, "acceptance", work=suite_work("acceptance")).groups
    assert copies.seconds[model.K_COPY] == pytest.approx(costs.one_gpu_copies_s + copying)
    assert single.seconds[model.K_RUN] == pytest.approx(costs.one_gpu_single_s)
    without = dataclasses.replace(costs, one_gpu_copies_s=None, one_gpu_single_s=None, one_gpu_single_unprepared_s=None)
    _, copies, single = predict(tests, header, thresholds, without, "acceptance", work=suite_work("acceptance")).groups
    assert copies.seconds[model.K_COPY] == pytest.approx(costs.copy_start_s + copying)
    assert single.seconds[model.K_RUN] == pytest.approx(costs.single_gpu_s)
    _, single = predict(tests[1:], header, thresholds, costs, "acceptance", work=suite_work("acceptance")).groups
    assert single.seconds[model.K_RUN] == pytest.approx(costs.single_gpu_s)  # no load before it: no pool runs


def test_a_run_that_measures_each_gpus_local_baseline_once_and_preloads_the_trainers_is_priced_so(thresholds):
    """The header's training says how its strategy runs go (training/local_baselines.py, workers.zygote): a later run
    on GPUs that all have a local baseline saves its price; each run saves the workers' quick exit and, with spare
    workers, the trainer's imports. A header without those words is priced as before (the recorded runs)."""
    costs = load_unit_costs()
    assert costs.local_baseline_s and costs.worker_exit_saving_s and costs.trainer_preload_s
    header = {"fabric": "nvswitch", "gpus": [{"index": 0}, {"index": 1}], "matrix": [["X", "NV18"], ["NV18", "X"]],
              "spare_workers": "on",
              "placements": [{"id": "nvswitch-2gpu-0.1", "class": "nvswitch", "gpus": [0, 1]},
                             {"id": "forced_pcie-2gpu-0.1", "class": "forced_pcie", "gpus": [0, 1],
                              "env": {"NCCL_P2P_DISABLE": "1"}}]}
    tests = [f"tests/test_strategies.py::test_steps_complete[{p}-{s}]"
             for p in ("nvswitch-2gpu-0.1", "forced_pcie-2gpu-0.1") for s in ("ddp", "zero3")]
    work = suite_work("acceptance")

    def runs(h: dict) -> list[float]:
        return [g.seconds[model.K_RUN] for g in predict(tests, h, thresholds, costs, "acceptance", work=work).groups]

    before = runs(header)
    now = runs({**header, "training": {"local_baseline": LOCAL_BASELINE_ONCE_PER_GPU,
                                       "trainer_workers": TRAINER_WORKERS_PRELOADED}})
    local, exit_s, preload = costs.local_baseline_s, costs.worker_exit_saving_s, costs.trainer_preload_s
    trainers = preload.get("ddp", 0.0) + preload.get("zero3", 0.0)
    # each placement's group holds its two runs; the first run on GPUs 0 and 1 measures their baselines, every
    # later one takes them
    assert [b - n for b, n in zip(before, now)] == pytest.approx([local + 2 * exit_s + trainers,
                                                                  2 * local + 2 * exit_s + trainers])
    off = {**header, "spare_workers": "off"}  # nothing forked: no preload
    assert [b - n for b, n in zip(runs(off), runs({**off, "training": {"trainer_workers": TRAINER_WORKERS_PRELOADED}}))] \
        == pytest.approx([2 * exit_s] * 2)


def test_a_run_that_takes_its_first_benchmark_round_from_the_sweep_is_priced_one_round_less(thresholds):
    """test_busbw's first pytest-benchmark round is its sweep's own floor-size calls where the header says so
    (wirecheck.measure.sweep.swept_round); the records before it measured every round; a run that keeps no round
    makes none beyond the sweep's, and the plan says what keeping them would add."""
    costs = load_unit_costs()
    header = {"fabric": "nvswitch", "gpus": [{"index": 0}, {"index": 1}], "matrix": [["X", "NV18"], ["NV18", "X"]],
              "workers": "pool", "placements": [{"id": "forced_pcie-2gpu-0.1", "class": "forced_pcie", "gpus": [0, 1],
                                                 "env": {"NCCL_P2P_DISABLE": "1"}}]}
    tests = [f"tests/test_collectives.py::test_busbw[forced_pcie-2gpu-0.1-{op}]" for op in ("all_reduce", "all_gather")]

    def plan(h: dict):
        return predict(tests, h, thresholds, costs, "acceptance", work=suite_work("acceptance"))

    def rounds(h: dict) -> tuple[int, float]:
        (group,) = plan(h).groups
        return group.work[model.K_ROUND], group.seconds[model.K_ROUND]

    n = thresholds.collective_settings(False).benchmark_rounds
    (before, before_s), (now, now_s) = rounds(header), rounds({**header, "benchmark": BENCHMARK_FIRST_ROUND_SWEPT})
    assert (before, now) == (2 * n, 2 * (n - 1))
    assert now_s == pytest.approx(before_s * (n - 1) / n)
    none_kept = plan({**header, "benchmark": BENCHMARK_SWEPT_ONLY})
    assert rounds({**header, "benchmark": BENCHMARK_SWEPT_ONLY}) == (0, 0.0)
    assert none_kept.rounds_if_kept[0] == now and none_kept.rounds_if_kept[1] == pytest.approx(now_s)
    assert plan(header).rounds_if_kept == (0, 0.0)


def test_a_one_gpu_nodes_training_is_priced_as_its_run_prepared_it(thresholds):
    """Where the header says the one-GPU training is prepared in the GPU load's shadow, it is priced at the prepared
    figure (3.2 s); a run before it paid the set-up and cuDNN's first attention in the training (5.0 s). A record
    written before the header said so gets it from its sustained load's settings, which name the aside."""
    costs = load_unit_costs()
    assert costs.one_gpu_single_s < costs.one_gpu_single_unprepared_s
    collected = {p: from_record(p)[0] for p in (ONE_GPU[0], ONE_GPU[3])}
    assert "single_gpu" not in collected[ONE_GPU[0]].header  # 2026-12-04: the load ran no aside
    assert collected[ONE_GPU[3]].header["single_gpu"] == SINGLE_GPU_PREPARED_IN_LOAD  # 2026-12-05: its settings say so

    def training_s(header: dict) -> float:
        c = collected[ONE_GPU[0]]
        plan = predict(c.tests, header, thresholds, costs, "acceptance", work=c.work)
        (group,) = [g for g in plan.groups if g.function == "test_single_gpu_training"]
        return group.seconds[model.K_RUN]

    header = collected[ONE_GPU[0]].header
    assert training_s(header) == pytest.approx(costs.one_gpu_single_unprepared_s)
    assert training_s({**header, "single_gpu": SINGLE_GPU_PREPARED_IN_LOAD}) == pytest.approx(costs.one_gpu_single_s)


class _NoFloorFor:
    """The shipped thresholds, except that `op` has no busbw floor anywhere (a new op whose floors are
    still to be measured)."""

    def __init__(self, thresholds, op):
        self._th, self._op = thresholds, op

    def __getattr__(self, name):
        return getattr(self._th, name)

    def busbw_limit(self, klass, op, n, simulated, *derived_from):
        return None if op == self._op else self._th.busbw_limit(klass, op, n, simulated, *derived_from)

    def slowest_busbw_floor(self, op, simulated):
        return None if op == self._op else self._th.slowest_busbw_floor(op, simulated)


def test_an_op_without_any_floor_is_priced_at_the_slowest_floor_of_the_others(thresholds):
    tests = ["tests/test_collectives.py::test_result_correct[pcie-2gpu-0.1-all_to_all]"]
    header = {**HEADER, "placements": [{"id": "pcie-2gpu-0.1", "class": "pcie", "gpus": [0, 1]}]}
    costs = dataclasses.replace(load_unit_costs(), busbw={})  # nothing measured: the floors price the wire
    plan = predict(tests, header, _NoFloorFor(thresholds, "all_to_all"), costs, "acceptance",
                   work=suite_work("acceptance"))
    slowest = min(lim.min for op in OPS if op != "all_to_all" and (lim := thresholds.slowest_busbw_floor(op, False)))
    (group,) = plan.groups
    assert group.work[model.K_SIZE] > 0 and group.total_s > 0
    walk = model._Walk(_NoFloorFor(thresholds, "all_to_all"), costs, [], header, "acceptance", "quick")
    assert walk._slowest_floor("all_to_all") == slowest


def test_an_op_without_a_table_floor_is_priced_at_the_floor_the_check_derives(thresholds):
    """reduce has no table floor on NVSwitch yet: the header's hardware (its NVLink speed) derives the one
    the busbw check would hold it to, not the slowest wire of the file."""
    hardware = {"gpu_model": "NVIDIA H200", "nvlinks_per_gpu": 18, "nvlink_speed": 26.562e9, "nvlink_gen": 4}
    walk = model._Walk(thresholds, load_unit_costs(), [], {**HEADER, "hardware": hardware}, "acceptance", "quick")
    (nvswitch, _) = model._placements(HEADER)
    assert thresholds.busbw_limit("nvswitch", "reduce", 2, False) is None
    efficiency = thresholds.derived_floor.for_op("reduce")[0]
    assert walk.busbw(nvswitch, "reduce") == pytest.approx(efficiency * 18 * 26.562e9)
    bare = model._Walk(thresholds, load_unit_costs(), [], HEADER, "acceptance", "quick")  # no hardware recorded
    assert bare.busbw(nvswitch, "reduce") == bare._slowest_floor("reduce")


AXES_TESTS = ["tests/test_collectives.py::test_axis_result_correct[nvswitch-2gpu-0.1-all_reduce-bf16-max]",
              "tests/test_collectives.py::test_axis_busbw[nvswitch-2gpu-0.1-all_reduce-bf16-max]",
              "tests/test_collectives.py::test_axis_result_correct[nvswitch-2gpu-0.1-all_gather-fp16]"]


@pytest.mark.parametrize("sweep", ["quick", "full"])
def test_a_further_dtype_and_reduction_is_priced_at_the_floor_size_or_every_size_of_the_full_sweep(thresholds, sweep):
    costs = load_unit_costs()
    plan = predict(AXES_TESTS, HEADER, thresholds, costs, "acceptance", sweep=sweep, work=suite_work("acceptance"))
    correct, busbw = plan.groups
    settings = thresholds.collective_settings(False)
    full = settings.sizes_for("full")
    # one sweep per combination; all_gather's smallest sizes give no rank 16 bytes (nccl-tests' 0-byte rows)
    sizes = 2 if sweep == "quick" else len(full) + len(feasible_sizes("all_gather", full, 2, "fp16"))
    assert len(full) - len(feasible_sizes("all_gather", full, 2, "fp16")) == 2  # 8 and 16 B
    assert correct.tests == 2 and correct.work[model.K_SIZE] == sizes
    assert busbw.work == {model.K_TEST: 1}  # it reads the sweep test_axis_result_correct made
    assert correct.params == {"ops": {"all_reduce", "all_gather"}, "dtypes": {"bf16", "fp16"}, "reductions": {"max"}}
    # the op's own sweep at the floor size is another measurement: priced again
    own = predict([*AXES_TESTS, "tests/test_collectives.py::test_large_all_reduce_correct[nvswitch-2gpu-0.1]"], HEADER,
                  thresholds, costs, "acceptance", sweep=sweep, work={**suite_work("acceptance"), **suite_work("quick")})
    assert own.groups[-1].work[model.K_SIZE] == 1


def test_the_quick_level_holds_no_further_dtype_or_reduction(thresholds):
    collected = collect("quick", "h100-sxm-8-nics")
    assert not [t for t in collected.tests if "test_axis_" in t]
    assert {t.split("::")[1].split("[")[0] for t in collected.tests if "test_collectives.py" in t} == \
        {"test_large_all_reduce_correct", "test_large_all_reduce_busbw"}


def test_a_work_marker_of_an_unknown_kind_is_a_usage_error():
    from pytest_wirecheck import work as plugin
    from wirecheck.vocab import work

    assert work.declared(("sweep", "benchmark"), {}, "t") == {"work": ("sweep", "benchmark"), "opt_in": None}

    class Item:
        nodeid = "tests/test_x.py::test_y"

        def get_closest_marker(self, name):
            return types.SimpleNamespace(args=("sweeps",), kwargs={}) if name == work.MARKER else None

    with pytest.raises(pytest.UsageError, match=r"tests/test_x.py::test_y: pytest.mark.work\('sweeps',\): "
                                                r"unknown kind 'sweeps'; known: sweep, floor sweep"):
        plugin.check([Item()])
    with pytest.raises(ValueError, match="unknown keyword 'optin'"):
        work.declared((), {"optin": "x"}, "t")


# ---- the command --------------------------------------------------------------------------------


def test_plan_prints_a_line_per_group_and_the_total(capsys):
    assert main(["plan", "--simulate", "h200-sxm-2", "--level", "quick"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert re.match(r"wirecheck plan: level quick on --simulate h200-sxm-2 \(its hardware from profile h200-sxm-2\) "
                    r"\(nvswitch, 2 GPUs\): \d+ tests in \d+ groups", lines[0]), lines[0]
    # One pool for the run: the GPU load started it, nvswitch's all_reduce runs on it; forced_pcie's environment
    # (NCCL_P2P_DISABLE) needs a pool of its own.
    assert re.search(r"^\s+[\d.]+\s+test_large_all_reduce_correct nvswitch 2gpu \(1 test\)\s+1 collective size",
                     out, re.M), out
    assert re.search(r"^\s+[\d.]+\s+test_large_all_reduce_correct forced_pcie 2gpu \(1 test\)\s+1 worker group start, "
                     r"1 collective size", out, re.M), out
    assert re.search(r"^\s+[\d.]+\s+total \(\d+ s\)$", out, re.M), out
    assert "test_steps_complete" not in out and "most of it: " in out


def test_plan_json_adds_up(capsys):
    assert main(["plan", "--profile", "h200-nvl-8", "--level", "quick", "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["fabric"] == "bridged" and plan["gpus"] == 8 and "h200-nvl-8" in plan["source"]
    assert sum(g["tests"] for g in plan["groups"]) == plan["tests"]
    assert plan["total_s"] == pytest.approx(plan["session_s"] + sum(g["seconds"] for g in plan["groups"]), abs=0.2)
    assert plan["unit_cost_sources"]["worker_group_start"].startswith("mean of 9 placement starts")


@pytest.mark.parametrize("name", ["h200-sxm-2", "h200-nvl-8"])
def test_a_recorded_topology_text_is_priced_with_the_hardware_of_the_profile_that_names_it(name, capsys):
    """A `topo -m` text names no GPU model or NVLink speed, so the op without a measured figure or a table
    floor (reduce) was priced at the thresholds' slowest floor, 10 GB/s: 3.7 min on 2x H200 SXM and 10.1 on
    H200 NVL where the same node's profile said 3.1 and 7.5. The profile whose topology is that file gives the
    hardware NVML would, and both ways now price the same."""
    assert main(["plan", "--simulate", name, "--json"]) == 0
    simulated = json.loads(capsys.readouterr().out)
    assert main(["plan", "--profile", name, "--json"]) == 0
    profiled = json.loads(capsys.readouterr().out)
    assert simulated["source"] == f"--simulate {name} (its hardware from profile {name})"
    assert simulated["total_s"] == pytest.approx(profiled["total_s"], abs=0.2)
    assert simulated["slowest_floor_priced"] == profiled["slowest_floor_priced"] == []


def test_simulate_profile_name_is_the_profiles_node_in_plan_topo_and_limits(capsys):
    """`--simulate profile:NAME` (a form the suite takes) priced reduce at the slowest floor in plan (3.5 min
    against --profile's 2.9 on 2x H200 SXM), and topo and limits refused it as "not found"."""
    assert main(["plan", "--simulate", "profile:h200-sxm-2", "--json"]) == 0
    simulated = json.loads(capsys.readouterr().out)
    assert main(["plan", "--profile", "h200-sxm-2", "--json"]) == 0
    assert simulated["total_s"] == json.loads(capsys.readouterr().out)["total_s"]
    assert main(["topo", "--simulate", "profile:b200-8"]) == 0
    assert capsys.readouterr().out.startswith("source: the node profile b200-8 (wired as recorded in ")
    assert main(["limits", "--simulate", "profile:h200-sxm-2"]) == 0
    assert "limits at acceptance on the node profile h200-sxm-2 describes" in capsys.readouterr().out


def test_benchmark_rounds_are_priced_where_the_run_keeps_them(capsys):
    """The suite collected for a plan keeps no pytest-benchmark round, so the plan prices test_busbw's sweep's own
    round alone and says what a nightly run that keeps them adds; --benchmark-kept prices them in."""
    assert main(["plan", "--profile", "h200-sxm-2", "--json"]) == 0
    none_kept = json.loads(capsys.readouterr().out)
    assert main(["plan", "--profile", "h200-sxm-2", "--json", "--benchmark-kept"]) == 0
    kept = json.loads(capsys.readouterr().out)
    assert "benchmark rounds" not in none_kept["by_kind"] and kept["rounds_if_kept"] == {"count": 0, "seconds": 0}
    added = none_kept["rounds_if_kept"]
    assert kept["by_kind"]["benchmark rounds"]["count"] == added["count"] > 0
    assert kept["total_s"] - none_kept["total_s"] == pytest.approx(added["seconds"], abs=0.3)
    assert main(["plan", "--profile", "h200-sxm-2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert f"    (--benchmark-autosave, -save, -json, -compare, -histogram, -csv: the nightly): +{added['count']} " \
           f"benchmark rounds, +{added['seconds']:.1f} s (--benchmark-kept)" in lines, lines


def test_a_topology_no_profile_names_says_what_it_priced_at_the_slowest_floor(tmp_path, capsys):
    """The same text under another name: no profile names it, so the plan prices reduce at the thresholds'
    slowest floor, and says which ops and placements, and how to price them as the node would."""
    text = tmp_path / "my-node.txt"
    text.write_text((suite_paths().topologies / "h200-sxm-2.txt").read_text())
    assert main(["plan", "--simulate", str(text), "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert "hardware from profile" not in plan["source"]
    assert {(e["op"], e["class"], e["n_gpus"]) for e in plan["slowest_floor_priced"]} == {
        ("reduce", "nvswitch", 2), ("reduce", "forced_pcie", 2)}
    assert main(["plan", "--simulate", str(text)]) == 0
    out = capsys.readouterr().out
    assert ("  priced at the thresholds' slowest floor (nothing measured, no table floor, no hardware in the topology "
            "to derive one): reduce on forced_pcie 2gpu, nvswitch 2gpu at 10.0 GB/s") in out, out
    assert "--simulate a snapshot (`wirecheck topo --save`) instead of a `topo -m` text" in out


def test_which_profile_describes_a_recorded_topology(thresholds):
    from wirecheck.plan.hardware_of import describing_profile, names_no_hardware, with_profile_hardware

    topologies = suite_paths().topologies
    assert describing_profile(thresholds, str(topologies / "h200-nvl-8.synthetic.txt"), topologies) == "h200-nvl-8"
    assert describing_profile(thresholds, str(topologies / "l40s-8.synthetic.txt"), topologies) == "l40s-8"
    # two profiles naming the same file: which hardware is the node's is not known, so neither is taken
    two = types.SimpleNamespace(profile_names=("a", "b"),
                                profile=lambda name: types.SimpleNamespace(topology="h200-sxm-2"))
    assert describing_profile(two, str(topologies / "h200-sxm-2.txt"), topologies) is None
    assert describing_profile(thresholds, str(topologies / "rtx4090-pcie-8.txt"), topologies) is None
    assert describing_profile(thresholds, None, topologies) is None
    assert names_no_hardware({"hardware": {"gpu_model": None, "nvlinks_per_gpu": 18}})
    assert not names_no_hardware({"hardware": {"gpu_model": "NVIDIA H200", "nvlink_speed": 26.6e9}})
    # a snapshot or a live node names its hardware: kept as it is; so is a header that is not simulated
    named = {"simulated": True, "simulation_source": str(topologies / "h200-sxm-2.txt"),
             "hardware": {"gpu_model": "NVIDIA H200", "nvlink_speed": 1.0}}
    assert with_profile_hardware(named, thresholds, topologies) == (named, None)
    live = dict(named, simulated=False, hardware={})
    assert with_profile_hardware(live, thresholds, topologies) == (live, None)
    header, name = with_profile_hardware(dict(named, hardware={"nvlinks_per_gpu": 18}), thresholds, topologies)
    assert name == "h200-sxm-2" and header["hardware"]["nvlink_speed"] and header["hardware"]["gpu_model"]


def test_plan_puts_a_record_beside_its_measured_wall_time(capsys):
    assert main(["plan", "--record", str(WARM[0])]) == 0
    out = capsys.readouterr().out
    assert re.search(r"run1\.jsonl: 148 tests at acceptance: predicted [\d.]+ s, measured 207\.6 s \([+-]\d+\.\d%\)", out), out


@pytest.mark.parametrize("argv, said", [
    (["plan", "--profile", "no-such"], "no-such"),
    (["plan", "--simulate", "no-such-node"], "--simulate no-such-node"),
    (["plan", "--simulate", "h200-sxm-2", "--duration", "4h"], "--duration 4h: only a burn-in runs for a duration"),
    # a simulation's wall time was compared with the hardware model: "+25.5%", "+249.6 %" read as misses
    (["plan", "--record", str(PROJECT / "selftests" / "data" / "sim-h200-sxm-2.jsonl")],
     "sim-h200-sxm-2.jsonl: a simulated run; the time model prices hardware runs"),
])
def test_plan_mistakes_are_one_clear_line(argv, said, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert said in err and "Traceback" not in err, err


def test_plan_without_an_option_plans_what_validate_would_run_here(monkeypatch, capsys):
    """On a machine without a driver it dumped pytest's collect-only lines and "NO GPU was validated" (exit 2)
    where validate simulates: it plans that simulation now, and says so."""
    from wirecheck.cli import plan as plan_cli
    from wirecheck.cli.validate import Mode

    no_driver = Mode(simulate="h200-sxm-2", notice="no NVIDIA driver on this machine (evidence).\nRunning ...")
    monkeypatch.setattr(plan_cli, "choose_mode", lambda args: no_driver)
    assert main(["plan", "--level", "quick"]) == 0
    out, err = capsys.readouterr()
    assert err.splitlines() == [
        "wirecheck plan: no NVIDIA driver on this machine (evidence).",
        "wirecheck plan: Planning the node `wirecheck validate` simulates here, h200-sxm-2, in its hardware run's "
        "seconds (pass --simulate NAME or --profile NAME to plan another node)"], err
    assert out.startswith("wirecheck plan: level quick on --simulate h200-sxm-2 (its hardware from profile h200-sxm-2) "
                          "(nvswitch, 2 GPUs)"), out
    broken = Mode(refusal="NVML failed: x\nAn NVIDIA driver is installed here; for a dry run on purpose: "
                          "wirecheck validate --simulate")
    monkeypatch.setattr(plan_cli, "choose_mode", lambda args: broken)
    assert main(["plan", "--level", "quick"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.endswith("for a dry run on purpose: wirecheck plan --simulate NAME\n"), err
    assert "::" not in err  # no collected test id


def test_a_broken_unit_costs_file_names_the_key(tmp_path):
    text = suite_paths().unit_costs.read_text().replace("per_test:", "per_tests:", 1)
    (tmp_path / "costs.yaml").write_text(text)
    with pytest.raises(ValueError, match=r"costs\.yaml: per_tests: unknown key 'per_tests' in unit costs"):
        load_unit_costs(tmp_path / "costs.yaml")


def test_the_unit_costs_file_is_what_the_script_makes_of_the_records():
    done = subprocess.run([sys.executable, str(PROJECT / "scripts" / "unit_costs.py")], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout == (PROJECT / "fixtures" / "pytest_wirecheck" / "unit_costs.yaml").read_text(), \
        "fixtures/pytest_wirecheck/unit_costs.yaml differs from the records: run scripts/unit_costs.py --write"


def test_the_script_refuses_runs_that_made_no_benchmark_round(tmp_path):
    """A run that kept no pytest-benchmark round made none beyond its sweep's: runs of that kind alone give no round's
    cost, and the script says so instead of writing 0 s, which would price the nightly's rounds at nothing."""
    runs = []
    for path in sorted((PROJECT / "fixtures" / "reference" / "h200-sxm-2" / "wirecheck-2026-12-01b").glob("run*.jsonl")):
        lines = path.read_text().splitlines()
        header = json.loads(lines[0])
        copy = tmp_path / path.name
        copy.write_text("\n".join([json.dumps({**header, "benchmark": BENCHMARK_SWEPT_ONLY}), *lines[1:]]) + "\n")
        runs.append(str(copy))
    script = [sys.executable, str(PROJECT / "scripts" / "unit_costs.py"), "--runs", *runs, "--startup-runs", *runs]
    refused = subprocess.run(script, capture_output=True, text=True, timeout=120)
    assert refused.returncode != 0 and "made a test_busbw benchmark round" in refused.stderr, refused.stderr


def test_the_script_refuses_a_cpu_rehearsal_of_the_preload_check(tmp_path):
    """preload_check.py --cpu times gloo ranks on the simulated model: no GPU node's saving to price."""
    node_log = PROJECT / "fixtures" / "reference" / "h200-1" / "preload-2026-12-04" / "preload-1.log"
    rehearsal = tmp_path / "preload-cpu.log"
    rehearsal.write_text("REHEARSAL on a CPU machine (gloo, the simulated model): not a GPU node's figures\n"
                         + node_log.read_text())
    script = [sys.executable, str(PROJECT / "scripts" / "unit_costs.py"), "--preload-checks"]
    taken = subprocess.run([*script, str(node_log)], capture_output=True, text=True, timeout=120)
    assert taken.returncode == 0 and "zero1:" in taken.stdout, taken.stderr
    refused = subprocess.run([*script, str(rehearsal)], capture_output=True, text=True, timeout=120)
    assert refused.returncode != 0 and "a CPU rehearsal of preload_check.py (--cpu)" in refused.stderr, refused.stderr


def test_a_group_line_counts_what_its_tests_vary_over(capsys):
    """GEMM's bf16 and fp8 read "1 variant' other dtypes and reductions" (taken for a collective axis test), and a
    one-GPU node "1 GPUs"."""
    assert main(["plan", "--profile", "h200-sxm-2", "--level", "quick"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert any("test_gemm_throughput (4 tests: 2 GPUs x 2 dtypes)" in line for line in lines), lines
    assert main(["plan", "--profile", "h200-sxm-2"]) == 0
    assert "(39 tests: 6 ops' other dtypes and reductions)" in capsys.readouterr().out
    from wirecheck.plan.table import describe_node

    assert describe_node(types.SimpleNamespace(header={"fabric": "pcie", "gpus": [{}]})) == "pcie, 1 GPU"


def test_an_empty_simulate_is_refused_never_read_as_this_node(capsys):
    """`--simulate ""` (an empty variable in a script) went to NVML, as if no --simulate were given."""
    for command in ("topo", "limits"):
        assert main([command, "--simulate", ""]) == 2
        assert "an empty topology: give a recorded topology NAME" in capsys.readouterr().err
