"""One GPU alone: the plain loop trains the strategies' model on one CPU rank,
the check passes and fails on its floor and on a non-finite loss, the floors are read per GPU
model, the dial divides each strategy's tokens/s per GPU by the one-GPU figure, and a one-GPU
node runs the training test instead of skipping it."""

from __future__ import annotations

import copy
import math
import types
from pathlib import Path

import pytest
import torch
import yaml

from e2e import make_project, records, run_suite
from pytest_wirecheck.gpu_health import training_aside
from pytest_wirecheck.measurements import StrategyRun
from wirecheck.checks.training import single_gpu_training
from wirecheck.checks.words import WORDS
from wirecheck.node.placement import Placement
from wirecheck.thresholds.file import ThresholdsError, load_thresholds
from wirecheck.training.dial import NO_BASELINE, dial_table
from wirecheck.training.model import GPT
from wirecheck.training.data import local_batch
from wirecheck.training.scaling import (SINGLE_GPU_PREPARE, SingleGpuRun, baseline_placement, prepare_kwargs,
                                        scaling_efficiency, single_gpu_kwargs)
from wirecheck.vocab.shape import GPTShape
from wirecheck.training.single_gpu import prepare, train_alone
from wirecheck.vocab.work import RUN, SINGLE_GPU_RUN
from wirecheck.workers.worker import RankContext

SHIPPED = Path(__file__).resolve().parents[1] / "thresholds.yaml"
TH = load_thresholds(SHIPPED)
SINGLE = Placement("single", (0,))
H200 = "NVIDIA H200"


def _ctx(world_size: int = 1) -> RankContext:
    return RankContext(rank=0, world_size=world_size, local_rank=0, backend="gloo", device=torch.device("cpu"),
                       label="selftest-single")


@pytest.fixture(scope="module")
def alone() -> dict:
    """The simulated settings' run on this process's CPU (the worker function itself, no group)."""
    return train_alone(_ctx(), **single_gpu_kwargs(TH.training_settings(True)))


def test_one_cpu_rank_trains_the_strategies_model(alone):
    settings = TH.training_settings(True)
    assert alone["world_size"] == 1 and alone["shape"] == settings.workload()["shape"]
    assert alone["optimizer"] == "fused" and alone["precision"] == settings.precision
    losses = alone["losses"]
    assert len(losses) == settings.warmup_steps + alone["timed_steps"] and all(math.isfinite(x) for x in losses)
    assert losses[-1] < losses[0]  # it learns
    assert alone["tokens_per_s"] == pytest.approx(settings.micro_batch * 32 / alone["step_time_median_s"])
    # the same weights and data as the strategies: loss 1 is the seeded model on rank 0's first micro-batch
    torch.manual_seed(0)
    s = GPTShape.of(alone["shape"])
    x, y = local_batch(0, 0, 0, settings.micro_batch, s.seq_len, s.vocab_size)
    assert losses[0] == pytest.approx(GPT(s)(x, y).item(), rel=1e-6)
    assert alone["achieved_flops_per_gpu"] == pytest.approx(6 * alone["n_params"] * alone["tokens_per_s"])
    # each warm-up step is timed alone, within the warm-up phase: where a node's first run loses its seconds
    assert len(alone["warmup_step_s"]) == settings.warmup_steps and all(t > 0 for t in alone["warmup_step_s"])
    assert sum(alone["warmup_step_s"]) <= alone["phase_s"]["warmup"]


def test_only_one_rank(alone):
    with pytest.raises(ValueError, match="must have 1 rank, it has 2"):
        train_alone(_ctx(2), **single_gpu_kwargs(TH.training_settings(True)))


def _judge(tokens_per_s: float, losses=(10.4, 10.1), gpu_model=H200, simulated=False, **extra):
    return single_gpu_training(TH, placement="single-1gpu-0", gpu_model=gpu_model, tokens_per_s=tokens_per_s,
                               losses=list(losses), simulated=simulated, **extra)


def test_the_check_passes_and_fails_on_the_models_floor():
    floor = TH.training_limits(False).single_gpu_floor(H200)
    assert floor.min == 38_300 and "45.1k" in floor.source
    ok = _judge(45_100, mfu=0.3)
    assert ok.outcome == "pass" and "MFU 30.0%" in ok.message
    low = _judge(30_000)
    assert low.outcome == "fail" and "30,000 tokens/s < floor 38,300 tokens/s" in low.message
    assert "training.single_gpu_throughput_floors.NVIDIA H200" in low.yaml_path
    assert "-m health" in WORDS["single_gpu_training"].todo and "the GPU itself or its host is slow" in low.message
    # another GPU model has its own floor; one without an entry is not judged, and says so
    assert _judge(36_000, gpu_model="NVIDIA H100 80GB HBM3").outcome == "pass"
    unknown = _judge(36_000, gpu_model="NVIDIA B200")
    assert unknown.outcome == "skip" and "no training.single_gpu_throughput_floors entry for 'NVIDIA B200'" in unknown.message
    assert _judge(0.5, gpu_model=None, simulated=True).outcome == "fail"  # the CPU sanity floor
    assert _judge(50, gpu_model=None, simulated=True).outcome == "pass"


def test_a_non_finite_loss_fails_whatever_the_floor():
    for model in (H200, "NVIDIA B200"):
        v = _judge(45_100, losses=(10.4, float("nan")), gpu_model=model)
        assert v.outcome == "fail" and "step 2: nan" in v.message, v.message
    assert _judge(45_100, losses=()).outcome == "fail"


def test_another_workload_is_not_judged_by_these_floors():
    own = TH.training_settings(False).workload()
    assert _judge(45_100, workload=own).outcome == "pass"
    other = {**own, "micro_batch": own["micro_batch"] * 2}
    assert _judge(45_100, workload=other).outcome == "skip"


def test_the_floors_keys_are_checked(tmp_path):
    data = yaml.safe_load(SHIPPED.read_text())
    missing = copy.deepcopy(data)
    del missing["training"]["single_gpu_throughput_floors"]
    bad = copy.deepcopy(data)
    bad["training"]["single_gpu_throughput_floors"][H200] = {"min": "38300 tokens/s"}
    for broken, expected in ((missing, "single_gpu_throughput_floors"), (bad, "source")):
        path = tmp_path / "thresholds.yaml"
        path.write_text(yaml.safe_dump(broken, sort_keys=False))
        with pytest.raises(ThresholdsError, match=expected):
            load_thresholds(path)


def test_scaling_is_tokens_per_gpu_over_one_gpu():
    assert scaling_efficiency(180_000, 4, 50_000) == pytest.approx(0.9)
    assert scaling_efficiency(180_000, 4, None) is None and scaling_efficiency(None, 4, 50_000) is None
    placements = [Placement("nvswitch", (0, 1)), Placement("single", (3,)), Placement("single", (5,))]
    assert baseline_placement(placements).id == "single-1gpu-3"
    assert baseline_placement(placements[:1]) is None


def _strategy_run(strategy: str, tokens_per_s: float) -> StrategyRun:
    rank = {"rank": 0, "n_params": 1_000_000, "tokens_per_s": tokens_per_s, "tokens_per_s_min": tokens_per_s,
            "tokens_per_s_max": tokens_per_s, "step_time_median_s": 0.1, "step_times_s": [0.1] * 8, "timed_steps": 8,
            "stop_reason": "settled", "losses": [10.4, 10.1], "model_state_bytes": {"params": 4_000_000},
            "device_name": H200, "achieved_flops_per_gpu": 6e6 * tokens_per_s / 2}
    return StrategyRun(Placement("nvswitch", (0, 1)), strategy, [rank, {**rank, "rank": 1}])


def test_the_dial_shows_each_strategys_scaling():
    runs = {"ddp": _strategy_run("ddp", 90_000), "fsdp": _strategy_run("fsdp", 45_000)}
    baseline = SingleGpuRun(SINGLE, [{"tokens_per_s": 50_000, "device_name": H200, "achieved_flops_per_gpu": 3e14}])
    limits = TH.training_limits(False)
    text = dial_table(runs, 2, limits, "bf16", baseline)
    head, columns, ddp, fsdp = text.splitlines()
    assert head == "scaling = tokens/s per GPU / one GPU alone on single-1gpu-0: 50,000 tokens/s, MFU 30.3%"
    at = columns.index("scaling")
    assert ddp[at - 1:at + 7].split() == ["90%"] and fsdp[at - 1:at + 7].split() == ["45%"], text
    without = dial_table(runs, 2, limits, "bf16", None).splitlines()
    assert without[0] == NO_BASELINE and without[2][at - 1:at + 7].split() == ["n/a"]


ONE_GPU = "\tGPU0\tCPU Affinity\tNUMA Affinity\nGPU0\t X \t0-15\t0\n"


def test_a_one_gpu_node_trains_instead_of_skipping_in_the_gpu_loads_worker(pytester):
    """One GPU alone trains where the strategies skip, and after the GPU load it trains in the load's one worker
    (the one-GPU node's pool): no second process start."""
    root = make_project(pytester)
    (root / "one.txt").write_text(ONE_GPU)
    out = root / "run.jsonl"
    result = run_suite(pytester, "--simulate=one.txt", "tests/test_gpu_health.py", "tests/test_strategies.py", "-rs",
                       f"--wirecheck-json={out}", "--benchmark-disable", "-k",
                       "hbm_bandwidth or sustained_load_throughput or single_gpu or steps_complete")
    text = result.stdout.str()
    result.assert_outcomes(passed=4, skipped=5)  # the five strategies still need two GPUs: skips saying so
    assert result.ret == 10 and "this node has 1 GPU" in text, text
    (run,) = [r for r in records(out) if r.get("kind") == "single_gpu_training"]
    assert run["placement"] == "single-1gpu-0" and run["details"]["ranks"][0]["world_size"] == 1
    assert run["details"]["workers"] == "pool", run["details"]
    (verdict,) = [r for r in records(out) if r.get("check") == "single_gpu_training"]
    assert verdict["outcome"] == "pass" and verdict["test"].endswith("test_single_gpu_training[single-1gpu-0]")
    # the training's one-time work was done in the sustained load's shadow, in the same worker, and recorded
    (load,) = [r for r in records(out) if r.get("kind") == "gpu_sustained"]
    assert load["details"]["settings"]["aside"]["function"] == SINGLE_GPU_PREPARE
    aside = load["details"]["result"]["aside"]
    assert aside["error"] is None and aside["result"]["seconds"] > 0, aside


def _item(gpus: tuple, *kinds) -> types.SimpleNamespace:
    marker = types.SimpleNamespace(args=kinds, kwargs={})
    return types.SimpleNamespace(nodeid="tests/x.py::t", callspec=types.SimpleNamespace(
        params={"placement": Placement("single" if len(gpus) == 1 else "pair", gpus)}),
        get_closest_marker=lambda name: marker)


def test_the_load_prepares_the_training_only_where_its_worker_trains_that_gpu_alone_next():
    """The sustained load's aside is asked for where the load is one GPU and a selected test trains that GPU
    alone (its pool worker trains next), with the training's own model, micro-batch and precision; not on a
    load of two GPUs (each training runs in new processes there), nor where no test trains that GPU alone."""
    node = types.SimpleNamespace(thresholds=TH, simulated=True)
    alone = _item((0,), SINGLE_GPU_RUN)
    aside = training_aside(node, (0,), [alone])
    settings = TH.training_settings(True)
    assert aside == {"function": SINGLE_GPU_PREPARE, "kwargs": {
        "shape": settings.run_kwargs("ddp")["shape"], "micro_batch": settings.micro_batch,
        "precision": settings.precision, "optimizer": "fused"}}
    assert training_aside(node, (0, 1), [alone]) is None
    assert training_aside(node, (1,), [alone]) is None
    assert training_aside(node, (0,), [_item((0, 1), RUN)]) is None
    assert training_aside(node, (0,), []) is None


def test_prepare_leaves_the_random_state_and_returns_its_seconds():
    """The preparation draws its block's weights and input inside a forked random state: a training after it
    starts from the same weights as without it."""
    kwargs = prepare_kwargs(single_gpu_kwargs(TH.training_settings(True)))
    before = torch.random.get_rng_state()
    out = prepare(_ctx(), **kwargs)
    assert torch.equal(before, torch.random.get_rng_state())
    assert out["seconds"] >= out["setup_s"] > 0 and "forward, backward" in out["what"]
    with pytest.raises(ValueError):
        prepare(_ctx(), **{**kwargs, "precision": "fp7"})
