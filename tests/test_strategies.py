"""Short training steps for every data-parallel strategy on every placement class.

Each strategy runs in fresh worker processes (DeepSpeed and Accelerate keep process-global
state). One run per (placement, strategy) feeds every check below.
"""

from __future__ import annotations

import math

import pytest

from pytest_wirecheck.measurements import feed_benchmark, nvlink_twin_or_skip, require
from wirecheck import capacity
from wirecheck.memory_model import STRATEGIES, predict
from wirecheck.quantity import format_bytes
from wirecheck.verdict import judge, limit_dict

TRAINING_CLASSES = ("nvswitch", "nvl_pair", "nvl_quad", "nvl_group", "cross_quad", "pcie", "forced_pcie")
REFERENCE = "ddp"

training_placements = pytest.mark.placements(*TRAINING_CLASSES, one_per_size=True)
each_strategy = pytest.mark.parametrize("strategy", STRATEGIES)


def _run(measurements, placement, strategy, strategy_worker, grad_hook):
    run = measurements.run(placement, strategy, strategy_worker, grad_hook)
    require(run)
    return run


def _tokens(rate: float) -> str:
    return f"{rate:,.0f} tokens/s"


def _gib(n: float) -> str:
    return f"{n / 2**30:.2f} GiB"


@training_placements
@each_strategy
def test_steps_complete(measurements, placement, strategy, strategy_worker, grad_hook, record):
    """Every step runs on every rank and every loss is finite."""
    run = _run(measurements, placement, strategy, strategy_worker, grad_hook)
    bad = {r["rank"]: r["losses"] for r in run.ranks if not all(math.isfinite(x) for x in r["losses"])}
    record("training", f"{strategy} losses finite", value=run.rank0["losses"], verdict="fail" if bad else "pass")
    assert not bad, f"{strategy} on {placement.id}: non-finite losses {bad}"


@training_placements
@pytest.mark.parametrize("strategy", [s for s in STRATEGIES if s != REFERENCE])
def test_losses_agree(node, measurements, placement, strategy, strategy_worker, grad_hook, record):
    """Same seed, same data: the first two losses match DDP's (the second one sees the first update,
    so a wrong gradient path shows up there)."""
    run = _run(measurements, placement, strategy, strategy_worker, grad_hook)
    ref = _run(measurements, placement, REFERENCE, strategy_worker, None)  # the reference always runs clean
    tol = node.thresholds.training_limits(node.simulated).agreement
    worst = 0.0
    for step in (0, 1):
        mine, theirs = run.rank0["losses"][step], ref.rank0["losses"][step]
        rel = abs(mine - theirs) / abs(theirs)
        worst = max(worst, rel)
        ok = rel <= tol.max_rel_diff
        record("training", f"{strategy} loss at step {step + 1} vs {REFERENCE}", value=mine, verdict="pass" if ok else "fail",
               limit={"max_rel_diff": tol.max_rel_diff, "source": tol.source, "yaml_path": tol.yaml_path},
               details={"reference": theirs, "rel_diff": rel})
        assert ok, (f"{strategy} on {placement.id}: loss at step {step + 1} {mine:.6f} vs {REFERENCE} {theirs:.6f}: "
                    f"relative difference {rel:.2e} > {tol.max_rel_diff:.2e} ({tol.yaml_path}; source: {tol.source})")


@training_placements
@each_strategy
def test_model_state_matches_model(node, measurements, placement, strategy, strategy_worker, grad_hook, record):
    """Parameters + gradients + optimizer state actually held per GPU (local shards only)
    within tolerance of the memory model for this implementation and precision."""
    run = _run(measurements, placement, strategy, strategy_worker, grad_hook)
    settings = node.thresholds.training_settings(node.simulated)
    expected = predict(strategy, run.rank0["n_params"], placement.n_gpus, accounting="implementation",
                       precision=settings.precision).total
    measured = run.model_state_bytes
    tol = node.thresholds.training_limits(node.simulated).model_state
    rel = abs(measured - expected) / expected
    ok = rel <= tol.max_rel_diff_from_model
    record("memory", f"{strategy} model-state bytes per GPU", value=measured, unit="B", verdict="pass" if ok else "fail",
           limit={"predicted": expected, "max_rel_diff": tol.max_rel_diff_from_model, "source": tol.source},
           details={"per_rank": [r["model_state_bytes"] for r in run.ranks]})
    assert ok, (f"{strategy} on {placement.id}: model state {format_bytes(measured)} per GPU vs predicted "
                f"{format_bytes(expected)} ({rel:.1%} off, allowed {tol.max_rel_diff_from_model:.0%}; {tol.yaml_path}); "
                f"per rank: {[r['model_state_bytes'] for r in run.ranks]}")


@training_placements
def test_staircase(node, measurements, reporter, placement, strategy_worker, grad_hook, record):
    """Model state per GPU: DDP >= ZeRO-1 >= ZeRO-2 >= ZeRO-3 ~ FSDP."""
    runs = {s: _run(measurements, placement, s, strategy_worker, grad_hook) for s in STRATEGIES}
    state = {s: r.model_state_bytes for s, r in runs.items()}
    reporter.table(f"strategy dial on {placement.id}", _dial_table(node, placement, runs))
    tol = node.thresholds.training_limits(node.simulated).model_state
    order = ["ddp", "zero1", "zero2", "zero3"]
    broken = [f"{a} {format_bytes(state[a])} < {b} {format_bytes(state[b])}" for a, b in zip(order, order[1:]) if state[a] < state[b]]
    # ZeRO-3 ~ FSDP: the same sharding in two implementations. Judged against what each
    # implementation stores (in fp32 DeepSpeed keeps an extra fp32 master copy; in bf16
    # both hold 16/N bytes per parameter), so only a real difference in sharding shows.
    precision = node.thresholds.training_settings(node.simulated).precision
    n_params = runs["zero3"].rank0["n_params"]
    expected = (predict("zero3", n_params, placement.n_gpus, precision=precision).total
                / predict("fsdp", n_params, placement.n_gpus, precision=precision).total)
    fsdp_gap = abs(state["zero3"] / state["fsdp"] / expected - 1)
    if fsdp_gap > tol.zero3_vs_fsdp_max_rel_diff:
        broken.append(f"zero3 {format_bytes(state['zero3'])} vs fsdp {format_bytes(state['fsdp'])}: ratio "
                      f"{state['zero3'] / state['fsdp']:.2f}, expected {expected:.2f} for {precision} "
                      f"(allowed {tol.zero3_vs_fsdp_max_rel_diff:.0%} off; {tol.yaml_path})")
    if placement.n_gpus > 1 and not state["ddp"] > state["zero3"]:
        broken.append(f"sharding saved nothing: ddp {format_bytes(state['ddp'])} vs zero3 {format_bytes(state['zero3'])}")
    record("memory", "staircase of model state", value={s: state[s] for s in STRATEGIES}, unit="B",
           verdict="fail" if broken else "pass")
    assert not broken, f"staircase broken on {placement.id}: " + "; ".join(broken)


def _dial_table(node, placement, runs) -> str:
    precision = node.thresholds.training_settings(node.simulated).precision
    rows = [f"{'strategy':8} {'state GiB meas/pred':>20} {'peak GiB':>9} {'tokens/s':>12} {'loss 1':>9} {'step s':>8}"]
    for s, run in runs.items():
        pred = predict(s, run.rank0["n_params"], placement.n_gpus, accounting="implementation", precision=precision).total
        peak = run.worst("peak_allocated_bytes")
        rows.append(f"{s:8} {run.model_state_bytes / 2**30:9.2f} / {pred / 2**30:8.2f} "
                    f"{(f'{peak / 2**30:9.2f}' if peak else '      n/a')} {run.tokens_per_s:12,.0f} "
                    f"{run.rank0['losses'][0]:9.4f} {run.rank0['step_time_median_s']:8.3f}")
    return "\n".join(rows)


@training_placements
@each_strategy
def test_peak_memory(node, measurements, placement, strategy, strategy_worker, grad_hook, record):
    """Peak allocated GPU memory per rank within the limit for this strategy."""
    if node.simulated:
        pytest.skip("simulation: CPU ranks have no device memory counters")
    run = _run(measurements, placement, strategy, strategy_worker, grad_hook)
    peak = run.worst("peak_allocated_bytes")
    limit = node.thresholds.training_limits(node.simulated).peak_memory(placement.klass, strategy)
    if limit is None:
        pytest.skip(f"no peak-memory limit for {placement.klass}/{strategy} in {node.thresholds.path}")
    verdict = judge(peak, limit, f"{strategy} peak allocated memory per GPU", placement.id, _gib)
    record("memory", f"{strategy} peak allocated", value=peak, unit="B", limit=limit_dict(limit), verdict=verdict.word)
    assert verdict.ok, verdict.message


@training_placements
@each_strategy
def test_throughput(node, measurements, placement, strategy, strategy_worker, grad_hook, benchmark, record):
    """Training throughput (global tokens/s, slowest rank) above the floor for the class."""
    run = _run(measurements, placement, strategy, strategy_worker, grad_hook)
    rate = run.tokens_per_s
    # Nightly regression: the step times measured in the workers become this test's
    # pytest-benchmark stats, so --benchmark-compare works on them.
    feed_benchmark(benchmark, run.rank0["step_times_s"], {"placement": placement.id, "strategy": strategy, "tokens_per_s": rate})
    limit = node.thresholds.training_limits(node.simulated).throughput_floor(placement.klass, strategy, placement.n_gpus)
    if limit is None:
        pytest.skip(f"no throughput floor for {placement.klass}/{strategy}/{placement.n_gpus} GPUs in {node.thresholds.path}")
    verdict = judge(rate, limit, f"{strategy} throughput", placement.id, _tokens)
    record("throughput", f"{strategy} tokens/s", value=rate, unit="tokens/s", limit=limit_dict(limit), verdict=verdict.word)
    assert verdict.ok, verdict.message


@pytest.mark.placements("forced_pcie")
@each_strategy
def test_slow_wire_costs(node, measurements, placement, strategy, strategy_worker, grad_hook, record):
    """On the host path each strategy is slower than on NVLink with the same GPUs, by at least
    its floor (ZeRO-3's floor is below 1: untuned, it is bound by its gather hooks, not the wire)."""
    if node.simulated:
        pytest.skip("simulation: gloo on CPU has no NVLink to lose")
    fast = _run(measurements, nvlink_twin_or_skip(node, placement), strategy, strategy_worker, grad_hook)
    slow = _run(measurements, placement, strategy, strategy_worker, grad_hook)
    rule = node.thresholds.training_limits(node.simulated).slow_wire
    slowdown = fast.tokens_per_s / slow.tokens_per_s
    minimum = rule.min_slowdown(strategy)
    ok = slowdown >= minimum
    record("slow_wire", f"{strategy} NVLink/host-path throughput", value=slowdown, unit="x", verdict="pass" if ok else "fail",
           limit={"min": minimum, "source": rule.source, "yaml_path": rule.yaml_path},
           details={"fast": fast.tokens_per_s, "slow": slow.tokens_per_s})
    assert ok, (f"{strategy}: {_tokens(fast.tokens_per_s)} on {fast.placement.id} vs {_tokens(slow.tokens_per_s)} on "
                f"{placement.id}: slowdown {slowdown:.2f}x < {minimum:.2f}x ({rule.yaml_path}.min_slowdown.{strategy}; source: {rule.source})")


@pytest.mark.placements("forced_pcie")
def test_dial_flattens(node, measurements, placement, strategy_worker, grad_hook, record):
    """On a slow wire the strategies move closer together (the dial flattens) or at least not apart."""
    if node.simulated:
        pytest.skip("simulation: gloo on CPU has no NVLink to lose")
    twin = nvlink_twin_or_skip(node, placement)
    fast = {s: _run(measurements, twin, s, strategy_worker, grad_hook).tokens_per_s for s in STRATEGIES}
    slow = {s: _run(measurements, placement, s, strategy_worker, grad_hook).tokens_per_s for s in STRATEGIES}
    spread_fast, spread_slow = max(fast.values()) / min(fast.values()), max(slow.values()) / min(slow.values())
    rule = node.thresholds.training_limits(node.simulated).slow_wire
    ok = spread_slow <= spread_fast * rule.max_spread_ratio
    record("slow_wire", "strategy spread slow/fast", value={"fast": spread_fast, "slow": spread_slow}, unit="x",
           verdict="pass" if ok else "fail", details={"fast": fast, "slow": slow})
    assert ok, (f"strategy spread {spread_slow:.2f}x on {placement.id} vs {spread_fast:.2f}x on {twin.id}: "
                f"allowed {spread_fast * rule.max_spread_ratio:.2f}x ({rule.yaml_path}; source: {rule.source})")


@pytest.mark.capacity
@training_placements
@pytest.mark.parametrize("strategy, expected", [("ddp", capacity.OOM), ("fsdp", capacity.FIT)])
def test_capacity(node, topology, measurements, placement, strategy, expected, strategy_worker, record):
    """A model whose DDP model state exceeds one GPU (the article's Mistral-7B case, scaled to
    this GPU): DDP must stop with a clean, reported out-of-memory; FSDP on the placement must run."""
    if node.simulated:
        pytest.skip("simulation: CPU ranks have no device memory to exhaust")
    settings = node.thresholds.training_settings(False)
    rule = node.thresholds.training_limits(False).capacity
    memory = min(topology.gpus[g].memory_bytes for g in placement.gpus)
    shape = capacity.capacity_shape(memory, rule.model_state_target, settings.precision, settings.model.seq_len,
                                    settings.model.vocab_size)
    n_params = capacity.capacity_params(memory, rule.model_state_target, settings.precision)
    fsdp_need = predict("fsdp", n_params, placement.n_gpus, precision=settings.precision).total
    if fsdp_need >= memory:
        pytest.skip(f"{placement.id}: FSDP would need {format_bytes(fsdp_need)} per GPU of {format_bytes(memory)}: "
                    "too few GPUs to show the case")
    run = measurements.run(placement, strategy, strategy_worker, None, shape=shape, warmup_steps=0, steps=rule.steps,
                           max_steps=None, local_baseline=False, timeout_s=rule.timeout_s)
    got = capacity.outcome(run.error)
    record("capacity", f"{strategy} with a {n_params / 1e9:.1f}B-parameter model", value=got,
           limit={"expected": expected, "source": rule.source, "yaml_path": rule.yaml_path},
           verdict="pass" if got == expected else "fail", details={"shape": shape, "gpu_memory": memory, "error": run.error})
    assert got == expected, (f"{strategy} on {placement.id} with {n_params / 1e9:.1f}B parameters "
                             f"(DDP state {rule.model_state_target:.0%} of {format_bytes(memory)}): expected {expected}, got {got}"
                             + (f"\n{run.error}" if run.error else ""))
