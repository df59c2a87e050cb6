"""Where each strategy trains (wirecheck.training.selection, fixtures/pytest_wirecheck/training_set.py): the
rule on recorded topologies, the tests it keeps in a simulated collection, `--training all`'s full grid, an
empty selection that says why, and a simulated run whose record's header holds the set."""

from __future__ import annotations

from pathlib import Path

import pytest

from e2e import PROJECT, make_project, records, run_suite
from wirecheck.node.placement import enumerate_placements
from wirecheck.node.topo_text import load_recorded
from wirecheck.training.selection import ALL, SELECTED, WHY_ARTICLE, WHY_SCALING, check_set, training_set
from wirecheck.vocab.strategies import NAMES

TOPOLOGIES = PROJECT / "fixtures" / "pytest_wirecheck" / "topologies"
NVL = "cross_quad-8gpu-0.1.2.3.4.5.6.7"


def _set(name: str, which: str = SELECTED, gpus=None) -> dict[str, tuple[str, ...]]:
    placements = enumerate_placements(load_recorded(name, TOPOLOGIES))
    if gpus is not None:  # what CUDA_VISIBLE_DEVICES or --placement leave of the node
        placements = [p for p in placements if set(p.gpus) <= set(gpus)]
    return {t.placement.id: t.strategies for t in training_set(placements, which)}


def test_h200_nvl_trains_every_strategy_on_a_pair_a_quad_across_quads_and_the_host_path_ddp_on_the_node():
    trained = _set("h200-nvl-8.synthetic")
    assert trained == {"nvl_pair-2gpu-0.1": NAMES, "nvl_quad-4gpu-0.1.2.3": NAMES, "cross_quad-4gpu-0.1.4.5": NAMES,
                       NVL: ("ddp",), "forced_pcie-2gpu-0.1": NAMES}
    assert sum(map(len, trained.values())) == 21  # the full grid: 30
    assert sum(map(len, _set("h200-nvl-8.synthetic", ALL).values())) == 30 and "cross_quad-2gpu-0.4" in _set(
        "h200-nvl-8.synthetic", ALL)


def test_an_nvswitch_node_trains_the_4_gpu_set_forced_pcie_and_its_twin_ddp_on_the_node():
    placements = enumerate_placements(load_recorded("a100-sxm-8.synthetic", TOPOLOGIES))
    trained = {t.placement.id: t for t in training_set(placements)}
    assert {k: t.strategies for k, t in trained.items()} == {
        "nvswitch-2gpu-0.1": NAMES, "nvswitch-4gpu-0.1.2.3": NAMES, "nvswitch-8gpu-0.1.2.3.4.5.6.7": ("ddp",),
        "forced_pcie-2gpu-0.1": NAMES}
    assert WHY_ARTICLE in trained["nvswitch-4gpu-0.1.2.3"].why and trained["nvswitch-8gpu-0.1.2.3.4.5.6.7"].why == (WHY_SCALING,)
    assert "forced_pcie-2gpu-0.1" in trained["nvswitch-2gpu-0.1"].why[0]  # in the set as the slow wire's twin


def test_a_2_gpu_node_and_a_narrowed_node_train_everything_they_have():
    assert _set("h200-sxm-2") == {"nvswitch-2gpu-0.1": NAMES, "forced_pcie-2gpu-0.1": NAMES}
    one_quad = _set("h200-nvl-8.synthetic", gpus=(0, 1, 2, 3))  # CUDA_VISIBLE_DEVICES=0,1,2,3: the quad is the node
    assert one_quad == {"nvl_pair-2gpu-0.1": NAMES, "nvl_quad-4gpu-0.1.2.3": NAMES, "forced_pcie-2gpu-0.1": NAMES}
    assert _set("l40s-8.synthetic") == {"pcie-4gpu-0.1.2.3": NAMES, "pcie-8gpu-0.1.2.3.4.5.6.7": ("ddp",)}


def test_an_unknown_set_is_refused_naming_the_option():
    with pytest.raises(ValueError, match="--training 'some'.*selected, all"):
        check_set("some")


def _ids(result) -> list[str]:
    return [line for line in result.outlines if "::" in line and "test_strategies" in line]


def test_a_simulated_collection_holds_the_tests_of_the_set_and_all_holds_the_grid(pytester):
    make_project(pytester)
    result = run_suite(pytester, "--simulate=h200-nvl-8", "--collect-only", "-q", "tests/test_strategies.py")
    ids = _ids(result)
    steps = {i.split("[")[1].rstrip("]") for i in ids if "::test_steps_complete[" in i}
    assert steps == {f"{p}-{s}" for p in ("nvl_pair-2gpu-0.1", "nvl_quad-4gpu-0.1.2.3", "cross_quad-4gpu-0.1.4.5",
                                          "forced_pcie-2gpu-0.1") for s in NAMES} | {f"{NVL}-ddp"}
    assert f"tests/test_strategies.py::test_throughput[{NVL}-ddp]" in ids
    assert not [i for i in ids if "cross_quad-2gpu" in i and "test_capacity" not in i]
    assert not [i for i in ids if NVL in i and ("zero" in i or "fsdp" in i or "staircase" in i) and "capacity" not in i]
    assert len([i for i in ids if "::test_staircase[" in i]) == 4  # where every strategy trains
    assert len([i for i in ids if "::test_slow_wire_costs[" in i]) == len(NAMES)
    result.stdout.fnmatch_lines([f"*training set selected (--training): 21 strategy runs on 5 placements*{NVL} ddp*"])
    grid = run_suite(pytester, "--simulate=h200-nvl-8", "--training", "all", "--collect-only", "-q",
                     "tests/test_strategies.py")
    assert len([i for i in _ids(grid) if "::test_staircase[" in i]) == 6
    assert f"tests/test_strategies.py::test_steps_complete[{NVL}-zero3]" in _ids(grid)


def test_a_selection_the_set_leaves_out_says_so_and_names_training_all(pytester):
    make_project(pytester)
    result = run_suite(pytester, "--simulate=h200-nvl-8", "-k", f"test_staircase and {NVL}", "--collect-only")
    assert result.ret == 4
    result.stderr.fnmatch_lines(["*--training selected selected none*1 test(s) on strategy runs outside the "
                                 "training set*--training all*"])
    assert run_suite(pytester, "--simulate=h200-nvl-8", "--training", "all", "-k", f"test_staircase and {NVL}",
                     "--collect-only").ret == 10


def test_a_simulated_run_keeps_the_set_in_its_records_header(pytester):
    """The whole node's DDP run skips in simulation (8 CPU ranks), so no worker starts; the record is kept."""
    make_project(pytester)
    out = Path(pytester.path) / "run.jsonl"
    result = run_suite(pytester, "--simulate=h200-nvl-8", "--no-spare-workers", "-k", f"test_throughput and {NVL}",
                       f"--wirecheck-json={out}", "tests/test_strategies.py")
    assert result.ret == 10, result.stdout.str()
    header = records(out)[0]
    assert header["training"]["set"] == SELECTED
    placed = {p["placement"]: p for p in header["training"]["placements"]}
    assert placed[NVL]["strategies"] == ["ddp"] and placed[NVL]["why"] == [WHY_SCALING]
    assert placed["nvl_quad-4gpu-0.1.2.3"]["strategies"] == list(NAMES) and "cross_quad-2gpu-0.4" not in placed


TRAINS_PROBE = '''
def pytest_collection_finish(session):
    from pytest_wirecheck import training_set
    print("TRAINS", training_set.trains(session.items))
'''


@pytest.mark.parametrize("simulate, selection, trains", [
    ("h200-sxm-2", "test_steps_complete and ddp", True),
    ("h200-sxm-2", "test_busbw", False),  # no strategy run: the zygote is not asked to import the trainers
    ("one.txt", "test_strategies", False),  # a one-GPU node: its strategy tests are collected without a placement
])
def test_a_run_asks_for_the_trainers_imports_only_where_a_selected_test_trains(pytester, simulate, selection, trains):
    root = make_project(pytester, tests_conftest=TRAINS_PROBE)
    (Path(root) / "one.txt").write_text("\tGPU0\tCPU Affinity\tNUMA Affinity\nGPU0\t X \t0-15\t0\n")
    result = run_suite(pytester, f"--simulate={simulate}", "-k", selection, "--collect-only", "-s")
    result.stdout.fnmatch_lines([f"TRAINS {trains}"])


def test_a_node_whose_placements_train_nothing_says_so_without_a_bare_colon():
    """One GPU (or no GPU read) trains alone: the line counts no placement and ends there."""
    import types

    from pytest_wirecheck.training_set import collection_lines

    marker = types.SimpleNamespace(kwargs={"training": True})
    item = types.SimpleNamespace(get_closest_marker=lambda name: marker if name == "placements" else None)
    assert collection_lines([], "selected", [item]) == [
        "wirecheck: training set selected (--training): 0 strategy runs on 0 placements"]
