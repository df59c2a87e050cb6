"""Each GPU's local step time measured once per run (wirecheck.training.local_baselines): the rule on its own, and a
simulated run in which the host path's DDP takes the figures NVLink's DDP measured on the same two GPUs."""

from __future__ import annotations

from pathlib import Path

import pytest

from e2e import make_project, records, run_suite
from wirecheck.training.local_baselines import LocalBaselines
from wirecheck.vocab.strategies import LOCAL_BASELINE_ONCE_PER_GPU as ONCE_PER_GPU

SHAPE = {"n_layer": 2, "n_head": 4, "d_model": 64, "vocab_size": 256, "seq_len": 32}
KWARGS = {"shape": SHAPE, "micro_batch": 2, "precision": "fp32"}


def _rank(median: float, **more) -> dict:
    return {"local_step_time_median_s": median, "local_step_time_ci_s": [median * 0.99, median * 1.01],
            "local_timed_steps": 8, "local_stop_reason": "settled", "local_optimizer": "fused", **more}


def test_a_run_takes_the_figures_of_its_gpus_only_when_every_gpu_has_one():
    local = LocalBaselines()
    assert local.arguments((0, 1), "ddp", KWARGS) is KWARGS  # nothing measured yet: the run measures
    local.keep((0, 1), "nvswitch-2gpu-0.1", "ddp", KWARGS, [_rank(0.010), _rank(0.012)])
    handed = local.arguments((1, 0), "fsdp", KWARGS)["local_baseline"]  # rank 0 is on GPU 1 here
    assert handed["ranks"]["0"]["local_step_time_median_s"] == 0.012
    assert handed["ranks"]["1"]["local_step_time_median_s"] == 0.010
    assert handed["from"] == {"0": "ddp on nvswitch-2gpu-0.1", "1": "ddp on nvswitch-2gpu-0.1"}
    # a GPU without one: the whole run measures again, and its figures replace the earlier ones
    assert local.arguments((0, 1, 2, 3), "ddp", KWARGS) is KWARGS
    local.keep((0, 1, 2, 3), "nvswitch-4gpu-0.1.2.3", "zero3", KWARGS, [_rank(0.02)] * 4)
    assert local.arguments((0, 1), "ddp", KWARGS)["local_baseline"]["from"]["0"] == "zero3 on nvswitch-4gpu-0.1.2.3"


def test_handed_figures_are_not_kept_again_and_other_work_is_its_own():
    local = LocalBaselines()
    local.keep((0,), "p", "ddp", KWARGS, [_rank(0.010, local_from="ddp on q")])  # handed, not measured here
    local.keep((1,), "p", "ddp", KWARGS, [{"local_skipped": "needs ~9 GiB, 2 GiB free"}])  # not measured at all
    assert local.arguments((0,), "ddp", KWARGS) is KWARGS and local.arguments((1,), "ddp", KWARGS) is KWARGS
    local.keep((0,), "p", "ddp", KWARGS, [_rank(0.010)])
    larger = {**KWARGS, "micro_batch": 4}
    assert local.arguments((0,), "ddp", larger) is larger  # another micro-batch computes another step
    no_baseline = {**KWARGS, "local_baseline": False}  # the capacity case asks for none: nothing handed
    assert local.arguments((0,), "ddp", no_baseline) is no_baseline


def test_the_host_path_takes_the_figures_nvlink_measured_on_the_same_gpus(pytester):
    make_project(pytester)
    out = Path(pytester.path) / "run.jsonl"
    result = run_suite(pytester, "--simulate=h200-sxm-2", "--no-spare-workers", "-k", "test_steps_complete and ddp",
                       f"--wirecheck-json={out}", "tests/test_strategies.py")
    assert result.ret == 10, result.stdout.str()
    lines = records(out)
    assert lines[0]["training"]["local_baseline"] == ONCE_PER_GPU
    runs = {m["placement"]: m["details"]["ranks"] for m in lines if m.get("kind") == "strategy"}
    settings = {m["placement"]: m["details"]["settings"] for m in lines if m.get("kind") == "strategy"}
    assert "local_baseline" not in settings["nvswitch-2gpu-0.1"]  # measured in the run itself, as the default says
    assert settings["forced_pcie-2gpu-0.1"]["local_baseline"] == {"from": ["ddp on nvswitch-2gpu-0.1"]}
    nvlink, host = runs["nvswitch-2gpu-0.1"], runs["forced_pcie-2gpu-0.1"]
    for measured, taken in zip(nvlink, host):
        assert "local" in measured["phase_s"] and "local_from" not in measured
        assert "local" not in taken["phase_s"] and taken["local_from"] == "ddp on nvswitch-2gpu-0.1"
        assert taken["local_step_time_median_s"] == measured["local_step_time_median_s"]
        assert taken["exposed_comm_s"] == pytest.approx(taken["step_time_median_s"] - measured["local_step_time_median_s"])
