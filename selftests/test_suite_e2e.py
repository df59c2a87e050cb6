"""The validation suite as users run it, in simulation on this CPU machine."""

from __future__ import annotations

from e2e import make_project, records, run_suite, thresholds_with
from wirecheck.vocab.ops import FURTHER_AXES, OPS


def test_k_nvl_quad_selects_exactly_the_quad_tests(pytester):
    make_project(pytester)
    result = run_suite(pytester, "--simulate=h200-nvl-8", "-k", "nvl_quad", "--collect-only", "-q")
    ids = [line for line in result.outlines if "::" in line]
    assert ids, result.stdout.str()
    assert all("nvl_quad" in i for i in ids), [i for i in ids if "nvl_quad" not in i]
    assert any("nvl_quad-4gpu-0.1.2.3" in i for i in ids) and any("nvl_quad-4gpu-4.5.6.7" in i for i in ids)
    # every collective test of the quads is there; each op's further dtypes and reductions with their own ids, on
    # the class's first largest placement only (tests/test_collectives.py: the kernels a class's wires share)
    for op in OPS:
        assert any(f"test_busbw[nvl_quad-4gpu-4.5.6.7-{op}]" in i for i in ids), op
    for a in FURTHER_AXES:
        assert any(f"test_axis_busbw[nvl_quad-4gpu-0.1.2.3-{a.id}]" in i for i in ids), a
    assert not [i for i in ids if "test_axis_" in i and "nvl_quad-4gpu-4.5.6.7" in i]


def test_header_says_simulation(pytester):
    make_project(pytester)
    result = run_suite(pytester, "--simulate=h200-nvl-8", "--collect-only", "tests/test_topology.py")
    result.stdout.fnmatch_lines(["*SIMULATION on *h200-nvl-8*", "*8 GPUs*fabric bridged*{0,1,2,3} {4,5,6,7}*"])


def test_a_one_gpu_node_says_why_the_wire_tests_skip(pytester):
    # A one-GPU VM (a slice of a bigger node) read as "no pcie placement on this topology (pcie)".
    root = make_project(pytester)
    (root / "one.txt").write_text("\tGPU0\tCPU Affinity\tNUMA Affinity\nGPU0\t X \t0-15\t0\n")
    skipped = run_suite(pytester, "--simulate=one.txt", "-rs", "tests/test_collectives.py", "-k", "test_busbw")
    text = skipped.stdout.str()
    assert skipped.ret == 10, text  # nothing failed, in simulation
    assert "this node has 1 GPU: nvswitch/nvl_pair/nvl_quad/nvl_group/cross_quad/pcie/forced_pcie placements need 2 or more" in text, text
    assert "placement on this topology (pcie" not in text, text
    # A bigger node without the class still names the fabric and the GPU count.
    quad = run_suite(pytester, "--simulate=h200-sxm-2", "-rs", "tests/test_collectives.py", "-k", "test_quad_beats_pair")
    assert "no nvl_quad placement on this topology (nvswitch, 2 GPUs)" in quad.stdout.str(), quad.stdout.str()


def test_placement_narrowing_is_named_where_it_leaves_a_class_out(pytester):
    """--placement leaves classes out that the node has: the skips said "no pair placement on this topology", and
    an empty -k listed only what --placement left, as if it were the node's."""
    make_project(pytester)
    quad = "nvl_quad-4gpu-0.1.2.3"
    skipped = run_suite(pytester, "--simulate=h200-nvl-8", "--placement", quad, "-rs", "tests/test_collectives.py",
                        "-k", "test_pair_busbw")
    assert f"no pair placement among --placement {quad}" in skipped.stdout.str(), skipped.stdout.str()
    empty = run_suite(pytester, "--simulate=h200-nvl-8", "--placement", "nvl_quad", "-k", "cross_quad", "--collect-only")
    assert empty.ret == 4 and "Placement ids on this node (bridged) left by --placement nvl_quad" in empty.stderr.str()


def test_no_gpu_fails_visibly_and_skips_the_rest(pytester):
    make_project(pytester)
    result = run_suite(pytester, "tests/test_inventory.py", "-rs")
    outcomes = result.parseoutcomes()
    assert outcomes["failed"] == 1 and outcomes["skipped"] > 0 and "passed" not in outcomes, outcomes
    out = result.stdout.str()
    assert "test_gpus_visible" in out and "no GPU visible" in out and "--simulate" in out
    assert "NO GPU TOPOLOGY" in out


def test_unknown_placement_is_a_usage_error(pytester):
    make_project(pytester)
    result = run_suite(pytester, "--simulate=h200-nvl-8", "--placement", "nvl_quad-4gpu-0.1.2.7", "--collect-only")
    assert result.ret == 4
    result.stderr.fnmatch_lines(["*--placement nvl_quad-4gpu-0.1.2.7: unknown placement*did you mean nvl_quad-4gpu-0.1.2.3*",
                                 "*nvl_quad: nvl_quad-4gpu-0.1.2.3 nvl_quad-4gpu-4.5.6.7*"])


def test_a_selection_that_matches_nothing_says_what_there_is(pytester):
    """`-k nvl_qaud` (a typo) is an error naming the placement ids, not pytest's silent exit 5."""
    make_project(pytester)
    result = run_suite(pytester, "--simulate=h200-nvl-8", "-k", "nvl_qaud", "--collect-only")
    assert result.ret == 4
    result.stderr.fnmatch_lines(["*-k 'nvl_qaud' selected none of the collected tests. did you mean nvl_quad[?] Placement ids*",
                                 "*nvl_quad: nvl_quad-4gpu-0.1.2.3 nvl_quad-4gpu-4.5.6.7*",
                                 "placement classes: nvswitch, nvl_pair, nvl_quad*"])


def test_a_placement_selection_without_gpus_says_why(pytester):
    """`pytest -k nvl_quad` on a machine with no GPU: the reason and the fix, not "86 deselected"."""
    make_project(pytester)
    result = run_suite(pytester, "-k", "nvl_quad")
    assert result.ret == 4
    result.stderr.fnmatch_lines(["*-k 'nvl_quad' selected none*without a GPU topology*--simulate NAME*h200-nvl-8*"])


def test_a_bad_wait_is_an_error_in_a_dry_run_too(pytester):
    # Simulated runs take no node lock, but a rehearsal of the acceptance command must still reject
    # the value the real run would stop on.
    make_project(pytester)
    result = run_suite(pytester, "--simulate=h200-sxm-2", "--wait-for-node", "5parsecs", "--collect-only")
    assert result.ret == 4, result.stdout.str() + result.stderr.str()
    assert "--wait-for-node '5parsecs': expected a duration like 90s" in result.stderr.str()


def test_unknown_simulation_name_is_a_usage_error(pytester):
    make_project(pytester)
    result = run_suite(pytester, "--simulate=no-such-node", "--collect-only")
    assert result.ret == 4
    result.stderr.fnmatch_lines(["*--simulate no-such-node*h200-nvl-8*"])


def test_malformed_thresholds_stop_the_run(pytester):
    make_project(pytester, thresholds_text="profiles: [\n")
    result = run_suite(pytester, "--simulate=h200-sxm-2", "--collect-only")
    assert result.ret == 4
    assert "thresholds.yaml" in result.stderr.str()


def test_all_reduce_on_quads_runs_and_records_every_size(pytester):
    root = make_project(pytester)
    out = root / "run.jsonl"
    result = run_suite(pytester, "--simulate=h200-nvl-8", "-k", "all_reduce and nvl_quad and not axis", f"--wirecheck-json={out}",
                       "--benchmark-disable", "-v")
    # busbw, correctness and latency on both quads; n½ is not judged in simulation (a skip says so)
    result.assert_outcomes(passed=6, skipped=2)
    recs = [r for r in records(out) if r.get("kind") == "collective"]
    sizes = {(r["placement"], r["details"]["bytes"]) for r in recs}
    assert {p for p, _ in sizes} == {"nvl_quad-4gpu-0.1.2.3", "nvl_quad-4gpu-4.5.6.7"}
    assert len(sizes) == 2 * len({b for _, b in sizes}) >= 6
    result.stdout.fnmatch_lines(["*wirecheck measurements*", "*all_reduce on nvl_quad-4gpu-0.1.2.3*",
                                 "*size*count*time*algbw*busbw*path*eager*graph*#wrong*", "*65536*eager*-*0"])
    assert all(r["details"]["path"] == "eager" and r["details"]["graph_time_s"] is None for r in recs)
    # Every rank of the pool (one per simulated GPU) was a spare: the two forked from the zygote while pytest
    # collected, the other six forked as the pool started.
    (spare,) = [r for r in records(out) if r.get("kind") == "spare_workers"]
    assert spare["value"] == spare["details"]["started"] == spare["details"]["forked"] == 8, spare
    assert spare["details"]["new_interpreters_because"] == {}, spare


def test_spare_workers_serve_the_gpu_load_and_never_start_when_told_not_to(pytester):
    root = make_project(pytester)
    for option, taken in (((), 2), (("--no-spare-workers",), 0)):
        out = root / f"run{len(option)}.jsonl"
        result = run_suite(pytester, "--simulate=h200-sxm-2", "-k", "test_hbm_bandwidth", f"--wirecheck-json={out}", *option)
        assert result.ret == 10, result.stdout.str()
        lines = records(out)
        assert lines[0]["spare_workers"] == ("off" if option else "on")  # what the plan prices the run's starts by
        spare = [r for r in lines if r.get("kind") == "spare_workers"]
        if taken:  # the GPU load's two ranks were the spares, which had started importing torch at configure
            assert len(spare) == 1 and spare[0]["value"] == taken and spare[0]["details"]["died"] == [], spare
        else:
            assert spare == []
    # A run where no selected test uses a worker: the spares go at the end of collection, unrecorded.
    out = root / "inventory.jsonl"
    assert run_suite(pytester, "--simulate=h200-sxm-2", "-k", "test_gpu_count", f"--wirecheck-json={out}").ret == 10
    assert not [r for r in records(out) if r.get("kind") == "spare_workers"]


def test_floor_failure_names_everything(pytester):
    def impossible_floor(data):
        data["collectives"]["simulated_floors"]["all_reduce"] = {"any": {"min": "9999 GB/s"}}  # over "*"

    make_project(pytester, thresholds_text=thresholds_with(impossible_floor))
    result = run_suite(pytester, "--simulate=h200-sxm-2", "-k", "test_busbw and all_reduce and nvswitch", "--benchmark-disable")
    result.assert_outcomes(failed=1)
    # the failure block: what, where, measured against which limit, which rule and file line made it
    result.stdout.fnmatch_lines(["busbw FAILED on nvswitch-2gpu-0.1: all_reduce busbw at 4 MiB",
                                 "  measured  * GB/s, * below",
                                 "  limit     >= 9999.0 GB/s (simulated limit; thresholds.yaml: "
                                 "collectives.simulated_floors.all_reduce.any)",
                                 "  means     *", "  to do     *", "  code      WC2021 *",
                                 "  test      tests/test_collectives.py::test_busbw[nvswitch-2gpu-0.1-all_reduce]"])


CORRUPT = '''
import pytest

@pytest.fixture
def collective_worker():
    return "faulty_workers:measure_corrupt"
'''


def test_corrupted_result_is_caught_with_rank_and_size(pytester):
    make_project(pytester, tests_conftest=CORRUPT)
    result = run_suite(pytester, "--simulate=h200-sxm-2", "-k", "test_result_correct and all_reduce and nvswitch", "--benchmark-disable")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["collective_correct FAILED on nvswitch-2gpu-0.1: all_reduce result",
                                 "  found     * rank 1 has * wrong elements (first at index *)"])


HANG = '''
import pytest

@pytest.fixture
def collective_worker():
    return "faulty_workers:measure_hang"
'''


def test_hang_is_reported_and_the_session_goes_on(pytester):
    def short_timeout(data):
        data["collectives"]["simulated"]["timeout"] = "8 s"

    make_project(pytester, thresholds_text=thresholds_with(short_timeout), tests_conftest=HANG)
    # measure_hang hangs rank 1 in all_reduce only; the placement is then retired: all_gather on it
    # skips at once naming the hang instead of starting over (a hung wire would hang it too). The pool the
    # hang ended is rebuilt for the test after it: forced_pcie's all_gather (its own environment, run last)
    # passes on new workers.
    result = run_suite(pytester, "--simulate=h200-sxm-2", "-k", "test_result_correct and ((nvswitch and (all_reduce or "
                       "all_gather)) or (forced_pcie and all_gather))", "--benchmark-disable", "-rs", "-v")
    result.assert_outcomes(failed=1, skipped=1, passed=1)
    result.stdout.re_match_lines([r".*nvswitch-2gpu-0\.1-all_reduce.* FAILED", r".*nvswitch-2gpu-0\.1-all_gather.* SKIPPED",
                                  r".*forced_pcie-2gpu-0\.1-all_gather.* PASSED"])
    result.stdout.fnmatch_lines(["*all_reduce at 64 KiB on nvswitch-2gpu-0.1 did not finish within 8*", "*rank 1*",
                                 "*SKIPPED*nvswitch-2gpu-0.1 hung earlier (all_reduce at 64 KiB did not finish within 8s; "
                                 "logs in *): its remaining tests are skipped"])


WRONG_GRADIENT = '''
import pytest

@pytest.fixture
def grad_hook(request):
    # only FSDP computes a wrong gradient; DDP (the reference) stays right
    return "faulty_training:flip_first_block_grad" if request.node.callspec.params.get("strategy") == "fsdp" else None
'''


def test_wrong_gradient_fails_the_agreement_check(pytester):
    make_project(pytester, tests_conftest=WRONG_GRADIENT)
    result = run_suite(pytester, "--simulate=h200-sxm-2", "-k", "test_losses_agree and nvswitch and (fsdp or zero1)",
                       "--benchmark-disable")
    result.assert_outcomes(passed=3, failed=1)  # step 1 comes before any update: only step 2 can differ
    out = result.stdout.str()
    assert "FAILED tests/test_strategies.py::test_losses_agree[nvswitch-2gpu-0.1-step2-fsdp]" in out
    result.stdout.fnmatch_lines(["losses_agree FAILED on nvswitch-2gpu-0.1: fsdp loss at step 2 vs ddp",
                                 "  measured  * relative difference, * above",
                                 "  limit     <= * relative difference (simulated limit; thresholds.yaml: training.agreement*"])


def test_slow_small_messages_fail_by_name(pytester):
    def impossible_ceilings(data):
        data["collectives"]["latency"]["simulated_ceilings"]["all_reduce"] = {"any": {"max": "1 us"}}  # over "*"
        data["collectives"]["half_peak"]["simulated_ceilings"] = {
            "all_reduce": {"any": {"max": "1 KiB", "source": "test: impossible"}}}

    make_project(pytester, thresholds_text=thresholds_with(impossible_ceilings))
    # --thresholds named: the default is the installed suite's file, not the pytester copy
    result = run_suite(pytester, "--simulate=h200-sxm-2", "--thresholds=thresholds.yaml", "-k",
                       "(test_small_message_latency or test_half_peak_size) and all_reduce and nvswitch",
                       "--benchmark-disable")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines([
        "small_message_latency FAILED on nvswitch-2gpu-0.1: all_reduce small-message latency (median of 1 size(s) "
        "from 64 KiB to 64 KiB, eager path: 64 KiB * eager)",
        "  measured  *, * above",
        "  limit     <= 1 µs (simulated limit; thresholds.yaml: collectives.latency.simulated_ceilings.all_reduce.any)",
        "half_peak_size FAILED on nvswitch-2gpu-0.1: all_reduce n½ (busbw first reaches 50% of the peak * GB/s at *",
        "  measured  * ?iB, * above",  # KiB or, on a loaded CPU machine, MiB
        "  limit     <= 1 KiB (simulated limit; thresholds.yaml: collectives.half_peak.simulated_ceilings.all_reduce.any)",
    ])
