"""The training library on CPU/gloo: every strategy trains, agrees, and holds what it should.

All five strategies run once per session, each in fresh worker processes (2 ranks, tiny GPT,
fp32), plus one run with a wrong gradient; every check below reads those records. The
processes dominate the time: ~2-3 s of interpreter start and imports per group, DeepSpeed
setup ~2 s more; the 4 steps themselves take well under a second.
"""

from __future__ import annotations

import math
import time

import pytest
import torch

from wirecheck.launcher import WorkerGroup
from wirecheck.memory_model import STRATEGIES, predict
from wirecheck.training import GPT, local_batch, param_count, shape_for_params
from wirecheck.training.runner import load_hook, run_strategy

WORKER = "wirecheck.training.runner:run_strategy"
FAULTY_HOOK = "selftests.faulty_training:flip_first_block_grad"
FAULTY_STRATEGY = "fsdp"  # the hook must survive a sharding wrapper, not only DDP
SHAPE = {"n_layer": 2, "n_head": 4, "d_model": 64, "vocab_size": 256, "seq_len": 32}
WORLD_SIZE = 2
RUN = {"shape": SHAPE, "micro_batch": 2, "warmup_steps": 1, "steps": 2, "seed": 0, "precision": "fp32"}
TIMEOUT_S = 180
LOSS_RTOL = 1e-5  # fp32: strategies differ only in reduction order
STATE_RTOL = 0.05  # measured model state vs memory_model IMPLEMENTATION(fp32)


def _train(strategy: str, grad_hook: str | None = None) -> dict:
    start = time.monotonic()
    with WorkerGroup(f"selftest-{strategy}", WORLD_SIZE, "gloo", join_process_group=False) as group:
        ranks = group.run(WORKER, {**RUN, "strategy": strategy, "grad_hook": grad_hook},
                          timeout_s=TIMEOUT_S, what=f"{strategy} training steps")
    return {"ranks": ranks, "wall_s": time.monotonic() - start}


@pytest.fixture(scope="session")
def runs() -> dict[str, dict]:
    """strategy -> {"ranks": [record per rank], "wall_s": seconds for the whole group}."""
    return {s: _train(s) for s in STRATEGIES}


@pytest.fixture(scope="session")
def faulty_run() -> dict:
    return _train(FAULTY_STRATEGY, FAULTY_HOOK)


def _state_total(run: dict) -> int:
    return max(sum(r["model_state_bytes"].values()) for r in run["ranks"])


def _rel(a: float, b: float) -> float:
    return abs(a - b) / abs(b)


# ---- the model and the data, in this process -------------------------------------------------


@pytest.mark.parametrize("shape", [
    SHAPE,
    {"n_layer": 3, "n_head": 2, "d_model": 32, "vocab_size": 100, "seq_len": 16},
])
def test_param_count_is_exact(shape):
    assert param_count(shape) == sum(p.numel() for p in GPT(shape).parameters())


@pytest.mark.parametrize("target", [1e8, 1.07e9, 7.24e9])
def test_shape_for_params_lands_near_target(target):
    shape = shape_for_params(target, seq_len=1024, vocab=32000)
    assert _rel(param_count(shape), target) < 0.02, shape
    assert shape["d_model"] == 64 * shape["n_head"]


def test_global_batch_is_the_same_however_it_is_split():
    """2 ranks x 2 samples see exactly the samples of 1 rank x 4: strategies and rank counts compare."""
    args = dict(seed=3, step=5, seq_len=SHAPE["seq_len"], vocab=SHAPE["vocab_size"])
    whole_x, whole_y = local_batch(rank=0, micro_batch=4, **args)
    halves = [local_batch(rank=r, micro_batch=2, **args) for r in (0, 1)]
    assert torch.equal(whole_x, torch.cat([h[0] for h in halves]))
    assert torch.equal(whole_y, torch.cat([h[1] for h in halves]))
    assert torch.equal(whole_x[:, 1:], whole_y[:, :-1])  # targets are the inputs shifted by one
    other_step, _ = local_batch(rank=0, micro_batch=4, **{**args, "step": 6})
    assert not torch.equal(whole_x, other_step)


def test_unknown_strategy_is_refused_before_any_work():
    with pytest.raises(ValueError, match="strategy 'zero4'"):
        run_strategy(None, "zero4", SHAPE, 2, 1, 2, 0, "fp32")


def test_bad_grad_hook_spec_names_the_form():
    with pytest.raises(ValueError, match="module:function"):
        load_hook("no_colon_here")


# ---- the strategies, in worker processes ----------------------------------------------------


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_strategy_trains_with_finite_losses(runs, strategy):
    ranks = runs[strategy]["ranks"]
    total_steps = RUN["warmup_steps"] + RUN["steps"]
    for r in ranks:
        assert len(r["losses"]) == total_steps and len(r["step_times_s"]) == RUN["steps"]
        assert all(math.isfinite(x) for x in r["losses"]), r["losses"]
        assert r["tokens_per_s"] > 0 and r["n_params"] == param_count(SHAPE)
    # the recorded loss is the global batch loss: every rank reports the same numbers
    assert ranks[0]["losses"] == ranks[1]["losses"]


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_wrapper_is_the_strategy(runs, strategy):
    expected = {"ddp": "DistributedDataParallel", "fsdp": "FSDPGPT"}.get(strategy, "DeepSpeedEngine")
    assert runs[strategy]["ranks"][0]["wrapper"] == expected


@pytest.mark.parametrize("step", [0, 1], ids=["first_loss", "loss_after_one_update"])
@pytest.mark.parametrize("strategy", [s for s in STRATEGIES if s != "ddp"])
def test_losses_agree_with_ddp(runs, strategy, step):
    """Step 0 is before any update (same weights, same data); step 1 sees the first update."""
    mine = runs[strategy]["ranks"][0]["losses"][step]
    ref = runs["ddp"]["ranks"][0]["losses"][step]
    assert _rel(mine, ref) <= LOSS_RTOL, f"{strategy} loss {mine!r} vs ddp {ref!r} at step {step + 1}"


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_model_state_matches_memory_model(runs, strategy):
    predicted = predict(strategy, param_count(SHAPE), WORLD_SIZE, "implementation", "fp32")
    for r in runs[strategy]["ranks"]:
        measured = r["model_state_bytes"]
        assert set(measured) == {"params", "grads", "optimizer"}
        assert _rel(sum(measured.values()), predicted.total) <= STATE_RTOL, (
            f"{strategy} rank {r['rank']}: measured {measured} vs predicted {predicted._asdict()}")


def test_staircase(runs):
    state = {s: _state_total(runs[s]) for s in STRATEGIES}
    assert state["ddp"] >= state["zero1"] >= state["zero2"] >= state["zero3"], state
    assert state["ddp"] > state["zero3"], state
    # ZeRO-3 and FSDP shard the same things; DeepSpeed keeps an extra fp32 master partition
    assert _rel(state["zero3"], state["fsdp"]) <= 0.35, state
    assert state["fsdp"] < state["zero2"], state


def test_wrong_gradient_shows_at_step_two(runs, faulty_run):
    clean = runs[FAULTY_STRATEGY]["ranks"][0]["losses"]
    broken = faulty_run["ranks"][0]["losses"]
    assert _rel(broken[0], clean[0]) <= LOSS_RTOL, "the hook must not change the forward pass"
    assert _rel(broken[1], clean[1]) > 100 * LOSS_RTOL, (
        f"step-2 loss {broken[1]!r} vs {clean[1]!r}: a reversed gradient went unnoticed")
