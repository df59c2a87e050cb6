"""Each GPU on its own, every GPU at once: HBM bandwidth, dense GEMM throughput, results that
match a reference bit for bit, a sustained load with clocks, power and temperature sampled
beside it, and a memory pattern test.

One worker per GPU, all concurrently, in one group started for the module (fixtures/
pytest_wirecheck/gpu_health.py); each measurement is made once, by the first test that needs it, and judged per
GPU by the functions in wirecheck.checks.gpu_health: against the GPU model's floor and against
the node's other GPUs (the peer rule). Select them all with `-m health` or `-k health`.
"""

from __future__ import annotations

import pytest

from wirecheck import checks
from wirecheck.vocab.work import FIGURES, MEMORY, SUSTAINED

# Every level measures the figures; quick holds the sustained load a few seconds, acceptance a minute
# (gpu_health.*.sustained.duration). A burn-in holds it for hours in rounds and judges the sustained load and
# the memory test over all of them (tests/test_burn_in.py): here it takes the figures only.
pytestmark = [pytest.mark.stage("measure", order=0), pytest.mark.health,
              pytest.mark.levels("quick", "acceptance", "burn-in")]
BURN_IN_JUDGES_IT = pytest.mark.levels("quick", "acceptance")


@pytest.mark.work(FIGURES)
@pytest.mark.parametrize("kind", ["copy", "read"])
def test_hbm_bandwidth(node, gpu, kind, gpu_load, gpu_health_workers, record):
    """HBM copy (read+write counted) and read bandwidth at least the floor, and not below the peers."""
    verdict = record(checks.gpu_health.hbm_bandwidth(
        node.thresholds, **gpu_load.inputs("hbm_bandwidth", gpu, gpu_health_workers, kind=kind)))
    assert verdict.ok, verdict.message


@pytest.mark.work(FIGURES)
@pytest.mark.parametrize("dtype", ["bf16", "fp8"])
def test_gemm_throughput(node, gpu, dtype, gpu_load, gpu_health_workers, record):
    """Dense square GEMM TFLOP/s at least the floor, and not below the peers (fp8 where the GPU has it)."""
    verdict = record(checks.gpu_health.gemm_throughput(
        node.thresholds, **gpu_load.inputs("gemm_throughput", gpu, gpu_health_workers, dtype=dtype)))
    assert verdict.ok, verdict.message


@pytest.mark.work(SUSTAINED)
@BURN_IN_JUDGES_IT
def test_sustained_load_throughput(node, gpu, gpu_load, gpu_health_workers, record):
    """While every GPU computes at once for the level's duration, the median window's TFLOP/s
    holds the floor and keeps up with the peers."""
    verdict = record(checks.gpu_health.sustained_throughput(
        node.thresholds, **gpu_load.inputs("sustained_throughput", gpu, gpu_health_workers)))
    assert verdict.ok, verdict.message


@pytest.mark.work(SUSTAINED)
@BURN_IN_JUDGES_IT
def test_sustained_load_clocks(node, gpu, gpu_load, gpu_health_workers, record):
    """No HW slowdown, thermal slowdown or power brake in any NVML sample under load."""
    verdict = record(checks.gpu_health.sustained_clocks(
        node.thresholds, **gpu_load.inputs("sustained_clocks", gpu, gpu_health_workers)))
    assert verdict.ok, verdict.message


@pytest.mark.work(SUSTAINED)
@BURN_IN_JUDGES_IT
def test_sustained_load_power(node, gpu, gpu_load, gpu_health_workers, record):
    """Under load the GPU draws its share of the power limit (DCGM's targeted power)."""
    verdict = record(checks.gpu_health.sustained_power(
        node.thresholds, **gpu_load.inputs("sustained_power", gpu, gpu_health_workers)))
    assert verdict.ok, verdict.message


@pytest.mark.work(SUSTAINED)
@BURN_IN_JUDGES_IT
def test_sustained_load_temperature(node, gpu, gpu_load, gpu_health_workers, record):
    """The hottest sample stays a margin below NVML's own slowdown threshold."""
    verdict = record(checks.gpu_health.sustained_temperature(
        node.thresholds, **gpu_load.inputs("sustained_temperature", gpu, gpu_health_workers)))
    assert verdict.ok, verdict.message


@pytest.mark.work(FIGURES)
def test_gemm_matches_reference(node, gpu, gpu_load, gpu_health_workers, record):
    """Every compared product, at rest and under the sustained load, bit-identical to the reference."""
    verdict = record(checks.gpu_health.gemm_matches_reference(
        node.thresholds, **gpu_load.math_inputs(gpu, gpu_health_workers)))
    assert verdict.ok, verdict.message


@pytest.mark.work(MEMORY)
@BURN_IN_JUDGES_IT
def test_memory_pattern(node, gpu, gpu_load, gpu_health_workers, record):
    """Patterns written over most of the free memory read back as written."""
    verdict = record(checks.gpu_health.memory_pattern(
        node.thresholds, **gpu_load.inputs("memory_pattern", gpu, gpu_health_workers)))
    assert verdict.ok, verdict.message
