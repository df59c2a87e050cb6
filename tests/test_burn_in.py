"""The burn-in (`--level burn-in --duration 4h`): every GPU under the GEMM load, every result compared
bit for bit, while collectives cycle over every placement at the floor size, checked element by element;
the memory test after each round; NVML, XIDs, ECC and link counters read throughout. It stops at the
first hard fault (fixtures/pytest_wirecheck/burn_in.py runs it once, wirecheck.burnin holds the loop).

Then the same checks as acceptance over the whole burn-in's figures (each GPU's sustained TFLOP/s
against its floor and its peers, clock-event reasons, power, temperature, the memory test; each
placement's busbw against its floor) and what only hours show: a GPU's TFLOP/s drifting from its first
rounds to its last, a placement's slowest round far below its others.
"""

from __future__ import annotations

import pytest

from wirecheck import checks
from wirecheck.burnin import judging
from wirecheck.vocab.ops import OPS
from wirecheck.node.placement import COLLECTIVE_CLASSES, link_ceiling
from wirecheck.vocab.work import BURN_IN_LOOP

# After the GPU figures (order 0), before the counters read at the end (stage last).
pytestmark = [pytest.mark.stage("measure", order=5), pytest.mark.health, pytest.mark.levels("burn-in")]


def _gpu(burn_in, gpu):
    if gpu not in burn_in.plan.gpus:
        pytest.skip(f"GPU{gpu} is not among the burn-in's GPUs ({', '.join(f'GPU{g}' for g in burn_in.plan.gpus)})")


@pytest.mark.work(BURN_IN_LOOP)
def test_burn_in_without_hard_fault(node, burn_in, record):
    """The burn-in ran to the end of --duration: no XID, no ECC growth, no wrong GEMM or collective result,
    no memory word wrong, no hang."""
    verdict = record(checks.burn_in.burn_in_no_hard_fault(node.thresholds, **judging.hard_fault(burn_in)))
    assert verdict.ok, verdict.message


@pytest.mark.work(BURN_IN_LOOP)
def test_burn_in_sustained_throughput(node, gpu, burn_in, record):
    """Each GPU's TFLOP/s over every round holds its floor and keeps up with its peers."""
    _gpu(burn_in, gpu)
    verdict = record(checks.gpu_health.sustained_throughput(node.thresholds, **judging.sustained(burn_in, gpu)))
    assert verdict.ok, verdict.message


@pytest.mark.work(BURN_IN_LOOP)
def test_burn_in_throughput_drift(node, gpu, burn_in, record):
    """No GPU loses throughput from its first rounds to its last (cooling that cannot keep up)."""
    _gpu(burn_in, gpu)
    verdict = record(checks.burn_in.burn_in_throughput_drift(node.thresholds, **judging.drift(burn_in, gpu)))
    assert verdict.ok, verdict.message


@pytest.mark.work(BURN_IN_LOOP)
def test_burn_in_clocks(node, gpu, burn_in, record):
    """No HW slowdown, thermal slowdown or power brake in any NVML sample of any round."""
    _gpu(burn_in, gpu)
    verdict = record(checks.gpu_health.sustained_clocks(node.thresholds, **judging.clocks(burn_in, gpu)))
    assert verdict.ok, verdict.message


@pytest.mark.work(BURN_IN_LOOP)
def test_burn_in_power(node, gpu, burn_in, record):
    """Under the burn-in's load the GPU draws its share of its power limit."""
    _gpu(burn_in, gpu)
    verdict = record(checks.gpu_health.sustained_power(node.thresholds, **judging.power(burn_in, gpu)))
    assert verdict.ok, verdict.message


@pytest.mark.work(BURN_IN_LOOP)
def test_burn_in_temperature(node, gpu, burn_in, record):
    """The hottest sample of the whole burn-in stays a margin below NVML's slowdown threshold."""
    _gpu(burn_in, gpu)
    verdict = record(checks.gpu_health.sustained_temperature(node.thresholds, **judging.temperature(burn_in, gpu)))
    assert verdict.ok, verdict.message


@pytest.mark.work(BURN_IN_LOOP)
def test_burn_in_memory_pattern(node, gpu, burn_in, record):
    """Every pass of the memory test after every round read back as written, over the required coverage."""
    _gpu(burn_in, gpu)
    verdict = record(checks.gpu_health.memory_pattern(node.thresholds, **judging.memory(burn_in, gpu)))
    assert verdict.ok, verdict.message


def _in_cycle(burn_in, placement, op):
    why = judging.not_in_cycle(burn_in, placement.id, op)
    if why:
        pytest.skip(f"{op} on {placement.id}: {why}")


@pytest.mark.work(BURN_IN_LOOP)
@pytest.mark.placements(*COLLECTIVE_CLASSES)
@pytest.mark.parametrize("op", OPS)
def test_burn_in_busbw(node, placement, op, burn_in, record):
    """Each placement's busbw over every step of every round (beside the load) within its floor."""
    _in_cycle(burn_in, placement, op)
    busbw, size = judging.busbw(burn_in, placement.id, op)
    ceiling = link_ceiling(node.topology, placement, node.profile.nvlink_speed if node.profile else None)
    verdict = record(checks.collectives.busbw(
        node.thresholds, op=op, placement=placement.id, placement_class=placement.klass, n_gpus=placement.n_gpus,
        simulated=node.simulated, busbw_bytes_per_s=busbw, size_bytes=size, link_ceiling_bytes_per_s=ceiling,
        hardware=node.hardware))
    assert verdict.ok, verdict.message


@pytest.mark.work(BURN_IN_LOOP)
@pytest.mark.placements(*COLLECTIVE_CLASSES)
@pytest.mark.parametrize("op", OPS)
def test_burn_in_busbw_spread(node, placement, op, burn_in, record):
    """No round of a placement's collective far below its median round (a link slowing down under load)."""
    _in_cycle(burn_in, placement, op)
    verdict = record(checks.burn_in.burn_in_busbw_spread(node.thresholds, **judging.spread(burn_in, placement.id, op)))
    assert verdict.ok, verdict.message
