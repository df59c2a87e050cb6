"""Short training steps for every data-parallel strategy on the run's training set, and one GPU
alone training the same model: the baseline of each strategy's scaling efficiency.

Where each strategy trains is the run's training set (wirecheck.training.selection, --training):
every strategy on the largest placement of each training class short of the whole node, on each
class's 4-GPU placement (the article's comparisons: an NVSwitch 4-GPU set, a full quad, across
quads) and on forced_pcie's NVLink twin; DDP alone on the whole node, for its scaling. A test runs
where the set makes the runs it needs (fixtures/pytest_wirecheck/training_set.py): the staircase where every strategy
trains, the slow wire's cost on forced_pcie against its twin. `--training all`: the full grid.

Each strategy runs in fresh worker processes (DeepSpeed and Accelerate keep process-global
state). One run per (placement, strategy) feeds every check below; each check is a
function in wirecheck.checks.training. The one-GPU run comes first (it is the first test
here), so the strategy runs after it carry their efficiency in the record and the dial.
"""

from __future__ import annotations

import pytest

from pytest_wirecheck.measurements import nvlink_twin_or_skip, require
from pytest_wirecheck.nightly import device_timed, replay
from wirecheck.training import capacity
from wirecheck import checks
from wirecheck.training.strategy_run import median_of, workload_of
from wirecheck.training.dial import dial_table
from wirecheck.training.memory_model import predict
from wirecheck.vocab.strategies import NAMES, REFERENCE
from wirecheck.node.placement import CLASS_FORCED_PCIE, CLASS_SINGLE, TRAINING_CLASSES
from wirecheck.core.quantity import format_bytes
from wirecheck.vocab.work import ALL_RUNS, REFERENCE_RUN, RUN, SINGLE_GPU_RUN, TWIN_ALL_RUNS, TWIN_RUN

pytestmark = [pytest.mark.stage("measure", order=4), pytest.mark.levels("acceptance")]

# The run's training set (--training): the placements each strategy trains on, and the tests whose runs it makes.
training_placements = pytest.mark.placements(*TRAINING_CLASSES, training=True)
each_strategy = pytest.mark.parametrize("strategy", NAMES)


def _run(measurements, record, placement, strategy, strategy_worker, grad_hook):
    run = measurements.run(placement, strategy, strategy_worker, grad_hook)
    require(record, f"{strategy} training steps", placement, run)
    # The dial (-v) of the strategies run on this placement so far, whichever test ran them (`-k throughput`
    # runs no staircase): a later table of the same placement replaces this one.
    runs = measurements.runs_on(placement)
    node = measurements.node
    measurements.reporter.table(f"strategy dial on {placement.id}", dial_table(
        {s: runs[s] for s in NAMES if s in runs}, placement.n_gpus, node.thresholds.training_limits(node.simulated),
        _settings(node).precision, measurements.baseline()))
    return run


def _settings(node):
    return node.thresholds.training_settings(node.simulated)


# The first GPU only: the GPU health checks already hold every GPU's GEMM and HBM against its
# peers at once; this is the dial's baseline, one run instead of one per GPU.
@pytest.mark.work(SINGLE_GPU_RUN)
@pytest.mark.placements(CLASS_SINGLE, one_per_size=True)
def test_single_gpu_training(node, measurements, placement, single_gpu_worker, record):
    """One GPU alone (no process group) trains the strategies' model: every loss finite and
    tokens/s at least the GPU model's floor; its tokens/s is what the dial's scaling divides by."""
    run = measurements.single_gpu(placement, single_gpu_worker)
    require(record, "one-GPU training steps", placement, run)
    r0 = run.rank0
    verdict = record(checks.training.single_gpu_training(
        node.thresholds, placement=placement.id, gpu_model=node.topology.gpu(placement.gpus[0]).name,
        tokens_per_s=r0["tokens_per_s"], losses=r0["losses"], simulated=node.simulated, workload=workload_of(r0),
        median=median_of(r0), mfu=run.mfu(node.thresholds.training_limits(node.simulated), _settings(node).precision)))
    assert verdict.ok, verdict.message


@pytest.mark.work(RUN)
@training_placements
@each_strategy
def test_steps_complete(node, measurements, placement, strategy, strategy_worker, grad_hook, record):
    """Every step runs on every rank and every loss is finite."""
    run = _run(measurements, record, placement, strategy, strategy_worker, grad_hook)
    verdict = record(checks.training.steps_complete(
        node.thresholds, placement=placement.id, strategy=strategy,
        losses_by_rank={r["rank"]: r["losses"] for r in run.ranks}))
    assert verdict.ok, verdict.message


@pytest.mark.work(RUN, REFERENCE_RUN)
@training_placements
@pytest.mark.parametrize("strategy", [s for s in NAMES if s != REFERENCE])
@pytest.mark.parametrize("step", [1, 2], ids=["step1", "step2"])
def test_losses_agree(node, measurements, placement, strategy, step, strategy_worker, grad_hook, record):
    """Same seed, same data: losses 1 and 2 match DDP's (the second one sees the first update,
    so a wrong gradient path shows up there)."""
    run = _run(measurements, record, placement, strategy, strategy_worker, grad_hook)
    ref = _run(measurements, record, placement, REFERENCE, strategy_worker, None)  # the reference always runs clean
    verdict = record(checks.training.losses_agree(
        node.thresholds, placement=placement.id, strategy=strategy, reference=REFERENCE, step=step,
        loss=run.rank0["losses"][step - 1], reference_loss=ref.rank0["losses"][step - 1], simulated=node.simulated))
    assert verdict.ok, verdict.message


@pytest.mark.work(RUN)
@training_placements
@each_strategy
def test_model_state_matches_model(node, measurements, placement, strategy, strategy_worker, grad_hook, record):
    """Parameters + gradients + optimizer state actually held per GPU (local shards only)
    within tolerance of the memory model for this implementation and precision."""
    run = _run(measurements, record, placement, strategy, strategy_worker, grad_hook)
    verdict = record(checks.training.model_state(
        node.thresholds, placement=placement.id, strategy=strategy, n_params=run.rank0["n_params"],
        n_gpus=placement.n_gpus, precision=_settings(node).precision, measured_bytes=run.model_state_bytes,
        per_rank=[r["model_state_bytes"] for r in run.ranks], simulated=node.simulated))
    assert verdict.ok, verdict.message


@pytest.mark.work(ALL_RUNS)
@training_placements
def test_staircase(node, measurements, placement, strategy_worker, grad_hook, record):
    """Model state per GPU: DDP >= ZeRO-1 >= ZeRO-2 >= ZeRO-3 ~ FSDP, compared on each placement where every
    strategy trains (the training set's: not the whole node where DDP alone trains)."""
    runs = {s: _run(measurements, record, placement, s, strategy_worker, grad_hook) for s in NAMES}
    verdict = record(checks.training.staircase(
        node.thresholds, placement=placement.id, n_gpus=placement.n_gpus, n_params=runs["zero3"].rank0["n_params"],
        precision=_settings(node).precision, state_bytes={s: r.model_state_bytes for s, r in runs.items()},
        simulated=node.simulated))
    assert verdict.ok, verdict.message


@pytest.mark.work(RUN)
@training_placements
@each_strategy
def test_peak_memory(node, measurements, placement, strategy, strategy_worker, grad_hook, record):
    """Peak allocated GPU memory per rank within the limit for this strategy."""
    run = _run(measurements, record, placement, strategy, strategy_worker, grad_hook)
    verdict = record(checks.training.peak_memory(
        node.thresholds, placement=placement.id, placement_class=placement.klass, strategy=strategy,
        peak_bytes=run.worst("peak_allocated_bytes"), simulated=node.simulated, workload=run.workload))
    assert verdict.ok, verdict.message


@pytest.mark.work(RUN)
@device_timed
@training_placements
@each_strategy
def test_throughput(node, measurements, placement, strategy, strategy_worker, grad_hook, benchmark, record):
    """Training throughput (global tokens/s, slowest rank) above the floor for the class."""
    run = _run(measurements, record, placement, strategy, strategy_worker, grad_hook)
    verdict = record(checks.training.throughput(
        node.thresholds, placement=placement.id, placement_class=placement.klass, strategy=strategy,
        n_gpus=placement.n_gpus, tokens_per_s=run.tokens_per_s, simulated=node.simulated, workload=run.workload,
        median=run.median, hardware=node.hardware))
    # Nightly regression: the step times measured in the workers are this test's benchmark rounds.
    benchmark.extra_info.update({"placement": placement.id, "strategy": strategy, "tokens_per_s": run.tokens_per_s})
    replay(benchmark, run.rank0["step_times_s"])
    assert verdict.ok, verdict.message


@pytest.mark.work(TWIN_RUN, RUN)
@pytest.mark.placements(CLASS_FORCED_PCIE, training=True)
@each_strategy
def test_slow_wire_costs(node, measurements, placement, strategy, strategy_worker, grad_hook, record):
    """On the host path each strategy is slower than on NVLink with the same GPUs, by at least
    its floor: forced_pcie against its NVLink twin (the verdict names both placements)."""
    if node.simulated:
        pytest.skip("simulation: gloo on CPU has no NVLink to lose")
    twin = nvlink_twin_or_skip(node, placement)
    fast = _run(measurements, record, twin, strategy, strategy_worker, grad_hook)
    slow = _run(measurements, record, placement, strategy, strategy_worker, grad_hook)
    verdict = record(checks.training.slow_wire(
        node.thresholds, placement=placement.id, nvlink_placement=twin.id, strategy=strategy,
        nvlink_tokens_per_s=fast.tokens_per_s, host_path_tokens_per_s=slow.tokens_per_s, workload=slow.workload))
    assert verdict.ok, verdict.message


@pytest.mark.work(TWIN_ALL_RUNS, ALL_RUNS)
@pytest.mark.placements(CLASS_FORCED_PCIE, training=True)
def test_dial_flattens(node, measurements, placement, strategy_worker, grad_hook, record):
    """No strategy collapses on the slow wire far beyond the others (thresholds.yaml training.slow_wire)."""
    if node.simulated:
        pytest.skip("simulation: gloo on CPU has no NVLink to lose")
    twin = nvlink_twin_or_skip(node, placement)
    fast = {s: _run(measurements, record, twin, s, strategy_worker, grad_hook) for s in NAMES}
    slow = {s: _run(measurements, record, placement, s, strategy_worker, grad_hook) for s in NAMES}
    verdict = record(checks.training.dial_flattens(
        node.thresholds, placement=placement.id, nvlink_placement=twin.id,
        nvlink_tokens_per_s={s: run.tokens_per_s for s, run in fast.items()},
        host_path_tokens_per_s={s: run.tokens_per_s for s, run in slow.items()}, workload=slow[REFERENCE].workload))
    assert verdict.ok, verdict.message


@pytest.mark.work(opt_in="skipped unless selected with -m capacity")
@pytest.mark.capacity
@pytest.mark.placements(*TRAINING_CLASSES, one_per_size=True)  # opt-in: DDP and FSDP side by side on every size
@pytest.mark.parametrize("strategy, expected", [("ddp", capacity.OOM), ("fsdp", capacity.FIT)])
def test_capacity(node, topology, measurements, placement, strategy, expected, strategy_worker, record):
    """A model whose DDP model state exceeds one GPU (the article's Mistral-7B case, scaled to
    this GPU): DDP must stop with a clean, reported out-of-memory; FSDP on the placement must run."""
    if node.simulated:
        pytest.skip("simulation: CPU ranks have no device memory to exhaust")
    settings = node.thresholds.training_settings(False)
    rule = node.thresholds.training_limits(False).capacity
    memory = min(topology.gpu(g).memory_bytes for g in placement.gpus)
    shape = capacity.capacity_shape(memory, rule.model_state_target, settings.precision, settings.model.seq_len,
                                    settings.model.vocab_size)
    n_params = capacity.capacity_params(memory, rule.model_state_target, settings.precision)
    fsdp_need = predict("fsdp", n_params, placement.n_gpus, precision=settings.precision).total
    if fsdp_need >= memory:
        pytest.skip(f"{placement.id}: FSDP would need {format_bytes(fsdp_need)} per GPU of {format_bytes(memory)}: "
                    "too few GPUs to show the case")
    run = measurements.run(placement, strategy, strategy_worker, None, shape=shape, warmup_steps=0, steps=rule.steps,
                           max_steps=None, local_baseline=False, timeout_s=rule.timeout_s)
    verdict = record(checks.training.capacity(
        node.thresholds, placement=placement.id, strategy=strategy, expected=expected,
        outcome=capacity.outcome(run.failure), n_params=n_params, gpu_memory_bytes=memory, error=run.error))
    assert verdict.ok, verdict.message
