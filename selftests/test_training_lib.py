"""The training library on CPU/gloo: every strategy trains, agrees, holds what it should, runs the
settings it was given, and reports the figures that explain the dial.

All five strategies run once per session, each in fresh worker processes (2 ranks, tiny GPT,
fp32), plus one run with a wrong gradient and one asking for a setting DeepSpeed cannot apply;
every check below reads those records. The timed steps stop by the rule of thresholds.yaml
(at least MIN_STEPS, at most MAX_STEPS); two runs pin the rule's outcome: DDP's bound is so
loose that it settles at MIN_STEPS, FSDP's is zero so that only the ceiling stops it. DDP also
profiles two extra steps. The processes dominate the time: ~2-3 s of interpreter start and
imports per group, DeepSpeed setup ~2 s more; the steps themselves take well under a second.
"""

from __future__ import annotations

import math
import time

import pytest
import torch

from wirecheck.workers.launcher import WorkerCallError, WorkerGroup
from wirecheck.training.memory_model import predict
from wirecheck.vocab.strategies import NAMES
from wirecheck.training import GPT, local_batch, param_count, shape_for_params
from wirecheck.training.runner import load_hook, run_strategy
from wirecheck.vocab.strategies import resolve_settings
from wirecheck.training.strategy_run import RUN_STRATEGY_WORKER as WORKER
from wirecheck.training.timing import CEILING, FIXED, SETTLED, ci_halfwidth

FAULTY_HOOK = "selftests.faulty_training:flip_first_block_grad"
FAULTY_STRATEGY = "fsdp"  # the hook must survive a sharding wrapper, not only DDP
SHAPE = {"n_layer": 2, "n_head": 4, "d_model": 64, "vocab_size": 256, "seq_len": 32}
WORLD_SIZE = 2
MIN_STEPS, MAX_STEPS, BOUND = 6, 10, 0.25
RUN = {"shape": SHAPE, "micro_batch": 2, "warmup_steps": 1, "steps": MIN_STEPS, "max_steps": MAX_STEPS,
       "ci_max_halfwidth": BOUND, "seed": 0, "precision": "fp32"}
EXTRA = {  # per strategy, on top of RUN (see the module doc)
    "ddp": {"ci_max_halfwidth": 100.0, "profile_steps": 2},
    "fsdp": {"ci_max_halfwidth": 0.0},
}
PROFILED = "ddp"
TIMEOUT_S = 180
LOSS_RTOL = 1e-5  # fp32: strategies differ only in reduction order
STATE_RTOL = 0.05  # measured model state vs memory_model IMPLEMENTATION(fp32)
ELEMENT_BYTES = {"fp32": 4}[RUN["precision"]]  # of a gradient in DeepSpeed's reduce buckets


def _train(strategy: str, grad_hook: str | None = None, **extra) -> dict:
    start = time.monotonic()
    kwargs = {**RUN, **EXTRA.get(strategy, {}), "strategy": strategy, "grad_hook": grad_hook, **extra}
    with WorkerGroup(f"selftest-{strategy}", WORLD_SIZE, "gloo", join_process_group=False) as group:
        ranks = group.run(WORKER, kwargs, timeout_s=TIMEOUT_S, what=f"{strategy} training steps")
    return {"ranks": ranks, "wall_s": time.monotonic() - start}


@pytest.fixture(scope="session")
def runs() -> dict[str, dict]:
    """strategy -> {"ranks": [record per rank], "wall_s": seconds for the whole group}."""
    return {s: _train(s) for s in NAMES}


@pytest.fixture(scope="session")
def faulty_run() -> dict:
    return _train(FAULTY_STRATEGY, FAULTY_HOOK, max_steps=None, steps=2, local_baseline=False)


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


@pytest.mark.parametrize("strategy", NAMES)
def test_strategy_trains_with_finite_losses(runs, strategy):
    ranks = runs[strategy]["ranks"]
    for r in ranks:
        timed = len(r["step_times_s"])
        assert MIN_STEPS <= timed <= MAX_STEPS and r["timed_steps"] == timed
        extra = EXTRA.get(strategy, {}).get("profile_steps", 0)
        assert len(r["losses"]) == RUN["warmup_steps"] + timed + extra
        assert all(math.isfinite(x) for x in r["losses"]), r["losses"]
        assert r["tokens_per_s"] > 0 and r["n_params"] == param_count(SHAPE)
    # the recorded loss is the global batch loss: every rank reports the same numbers
    assert ranks[0]["losses"] == ranks[1]["losses"]
    # the slowest rank's time per step: every rank holds the same samples, took the same decision
    assert ranks[0]["step_times_s"] == ranks[1]["step_times_s"]


@pytest.mark.parametrize("strategy", NAMES)
def test_settings_in_force_are_the_tables(runs, strategy):
    """The runner read every setting back from the engine/module; the record carries them."""
    asked = resolve_settings(strategy, SHAPE)
    got = runs[strategy]["ranks"][0]["settings"]
    assert set(got) == set(asked)
    for key, value in asked.items():
        assert got[key] == (list(value) if isinstance(value, tuple) and isinstance(got[key], list) else value), key


def test_a_setting_not_in_force_fails_the_run():
    """FSDP cannot reduce in bf16 when the run is fp32 (there is no bf16 policy to apply): asked
    anyway, the run must stop before its first step instead of reporting fp32 as bf16."""
    with pytest.raises(WorkerCallError, match="fsdp: settings not in force: reduce_dtype: asked 'bf16', runs 'fp32'"):
        _train("fsdp", settings={"reduce_dtype": "bf16"}, max_steps=None, steps=1, local_baseline=False)


@pytest.mark.parametrize("strategy", NAMES)
def test_step_times_stop_by_the_rule(runs, strategy):
    r = runs[strategy]["ranks"][0]
    times, n = r["step_times_s"], r["timed_steps"]
    assert r["step_time_min_s"] == min(times) and r["step_time_max_s"] == max(times)
    lo, hi = r["step_time_ci_s"]
    assert lo <= r["step_time_median_s"] <= hi and r["step_time_ci_confidence"] == pytest.approx(0.95)
    assert r["tokens_per_s_min"] <= r["tokens_per_s"] <= r["tokens_per_s_max"]
    bound = EXTRA.get(strategy, {}).get("ci_max_halfwidth", BOUND)
    if r["stop_reason"] == SETTLED:
        assert r["step_time_ci_halfwidth"] <= bound
    else:
        assert r["stop_reason"] == CEILING and n == MAX_STEPS
        assert ci_halfwidth(times, 0.95) > bound


def test_a_loose_bound_settles_at_the_minimum(runs):
    r = runs["ddp"]["ranks"][0]
    assert (r["stop_reason"], r["timed_steps"]) == (SETTLED, MIN_STEPS)


def test_a_zero_bound_runs_to_the_ceiling(runs):
    r = runs["fsdp"]["ranks"][0]
    assert (r["stop_reason"], r["timed_steps"]) == (CEILING, MAX_STEPS)


def test_fixed_steps_when_no_ceiling(faulty_run):
    r = faulty_run["ranks"][0]
    assert (r["stop_reason"], r["timed_steps"]) == (FIXED, 2)
    assert r["exposed_comm_s"] is None and "local_step_time_median_s" not in r


@pytest.mark.parametrize("strategy", NAMES)
def test_flops_and_exposed_communication_are_reported(runs, strategy):
    for r in runs[strategy]["ranks"]:
        assert r["model_flops_per_token"] == 6 * param_count(SHAPE)
        assert r["attention_flops_per_token"] == 12 * SHAPE["n_layer"] * SHAPE["d_model"] * SHAPE["seq_len"]
        assert r["achieved_flops_per_gpu"] == pytest.approx(r["model_flops_per_token"] * r["tokens_per_s"] / WORLD_SIZE)
        local = r["local_step_time_median_s"]
        assert local > 0 and r["local_timed_steps"] >= MIN_STEPS and r["local_optimizer"] == r["settings"]["optimizer"]
        assert r["exposed_comm_s"] == pytest.approx(r["step_time_median_s"] - local)
        assert r["exposed_comm_fraction"] == pytest.approx(r["exposed_comm_s"] / r["step_time_median_s"])
        assert -1 < r["exposed_comm_fraction"] < 1
        assert set(r["phase_s"]) >= {"setup", "build", "wrap", "warmup", "timed", "state", "local"}
        assert r["phase_s"]["build"] + r["phase_s"]["wrap"] <= r["phase_s"]["setup"]
        assert "setup_profile" not in r  # the suite's runs are never profiled


@pytest.mark.parametrize("strategy", NAMES)
def test_reduce_buckets_are_reported_apart(runs, strategy):
    """DeepSpeed's reduce buckets are not model state: they are reported apart, and are never more
    than DeepSpeed's own buckets (reduce_bucket_size elements each, two with overlap_comm). ZeRO-1
    and ZeRO-3 hold theirs at the state measurement; ZeRO-2 allocates them at each backward and may
    already have freed them after its end-of-backward reduction (0 bytes here), but a gradient
    counted as a bucket would exceed the bound. torch's strategies have none."""
    for r in runs[strategy]["ranks"]:
        buffers = r["comm_buffer_bytes"]
        if strategy in ("ddp", "fsdp"):
            assert buffers == 0
            continue
        settings = r["settings"]
        most = (2 if settings["overlap_comm"] else 1) * settings["reduce_bucket_size"] * ELEMENT_BYTES
        assert 0 <= buffers <= most, f"{strategy} rank {r['rank']}: {buffers} B of reduce buckets, at most {most} B"
        if strategy in ("zero1", "zero3"):
            assert buffers > 0


def test_profile_summarises_the_extra_steps(runs):
    for name, run in runs.items():
        assert ("profile" in run["ranks"][0]) == (name == PROFILED)
    p = runs[PROFILED]["ranks"][0]["profile"]
    assert p["profiled_steps"] == 2 and p["events"] > 0 and p["timeline"] == "cpu ops"
    assert 0 < p["busy_ms"] <= p["window_ms"] + 1e-9
    assert p["comm_ms"] > 0  # DDP's gloo all-reduce is on the timeline
    assert 0 <= p["comm_only_ms"] <= p["comm_ms"] + 1e-9
    assert p["top"] and all(t["ms"] > 0 for t in p["top"])


@pytest.mark.parametrize("strategy", NAMES)
def test_wrapper_is_the_strategy(runs, strategy):
    expected = {"ddp": "DistributedDataParallel", "fsdp": "FSDPGPT"}.get(strategy, "DeepSpeedEngine")
    assert runs[strategy]["ranks"][0]["wrapper"] == expected


@pytest.mark.parametrize("step", [0, 1], ids=["first_loss", "loss_after_one_update"])
@pytest.mark.parametrize("strategy", [s for s in NAMES if s != "ddp"])
def test_losses_agree_with_ddp(runs, strategy, step):
    """Step 0 is before any update (same weights, same data); step 1 sees the first update."""
    mine = runs[strategy]["ranks"][0]["losses"][step]
    ref = runs["ddp"]["ranks"][0]["losses"][step]
    assert _rel(mine, ref) <= LOSS_RTOL, f"{strategy} loss {mine!r} vs ddp {ref!r} at step {step + 1}"


@pytest.mark.parametrize("strategy", NAMES)
def test_model_state_matches_memory_model(runs, strategy):
    predicted = predict(strategy, param_count(SHAPE), WORLD_SIZE, "implementation", "fp32")
    for r in runs[strategy]["ranks"]:
        measured = r["model_state_bytes"]
        assert set(measured) == {"params", "grads", "optimizer"}
        assert _rel(sum(measured.values()), predicted.total) <= STATE_RTOL, (
            f"{strategy} rank {r['rank']}: measured {measured} vs predicted {predicted._asdict()}")


def test_staircase(runs):
    state = {s: _state_total(runs[s]) for s in NAMES}
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
