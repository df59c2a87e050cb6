"""Collective bus bandwidth and correctness on every placement (nccl-tests conventions).

Every size of the sweep is checked element by element; bandwidth floors apply at the
floor size from thresholds.yaml. The sweep is measured once per (placement, op) and shared
by the checks below; each check is a function in wirecheck.checks.collectives. Each op's further
dtypes and reductions (nccl-tests' -d and -o: `test_axis_*[...-all_reduce-bf16-max]`) are measured
at the floor size (every size with --sweep full), checked and judged by the op's floor. The quick level
runs only the two `test_large_all_reduce_*` tests: one all_reduce at the floor size per class. A burn-in
runs none of them: its collectives cycle beside the GPU load for hours (tests/test_burn_in.py).
"""

from __future__ import annotations

import os

import pytest

from pytest_wirecheck.measurements import nvlink_twin_or_skip, require
from pytest_wirecheck.nightly import device_timed, time_rounds
from wirecheck import checks
from wirecheck.vocab.ops import FURTHER_AXES, OPS
from wirecheck.node.placement import CLASS_CROSS_QUAD, CLASS_FORCED_PCIE, CLASS_PAIR, COLLECTIVE_CLASSES, link_ceiling
from wirecheck.core.quantity import format_bytes
from wirecheck.measure.sweep import swept_round
from wirecheck.vocab.work import AXIS_SWEEP, BENCHMARK, FLOOR_SWEEP, INNER_PAIR_SWEEP, PAIR_SWEEPS, SWEEP, TWIN_SWEEP

AXIS_CLASSES = tuple(c for c in COLLECTIVE_CLASSES if c not in (CLASS_FORCED_PCIE, CLASS_CROSS_QUAD))

pytestmark = [pytest.mark.stage("measure", order=2), pytest.mark.levels("acceptance")]


def _link_ceiling(node, placement) -> float | None:
    """min NV# over the placement's pairs x per-link speed (bytes/s), when both are known."""
    return link_ceiling(node.topology, placement, node.profile.nvlink_speed if node.profile else None)


def _at_floor_size(node, record, sweep):
    """The sweep's result at the floor size (requiring the sweep to have completed)."""
    require(record, f"{sweep.op} sweep", sweep.placement, sweep)
    size = node.thresholds.collective_settings(node.simulated).floor_size
    result = sweep.at(size)
    if result is None:
        pytest.fail(f"{sweep.op} on {sweep.placement.id}: no measurement at the floor size {format_bytes(size)} "
                    f"({node.thresholds.path}: collectives: floor_size must be one of sizes)", pytrace=False)
    return result


def _busbw_verdict(node, placement, op, result, klass=None, **axes):
    """`axes`: dtype=, reduction= past the op's first (none for its own: its inputs as before the axes)."""
    return checks.collectives.busbw(
        node.thresholds, op=op, placement=placement.id, placement_class=klass or placement.klass,
        n_gpus=placement.n_gpus, simulated=node.simulated, busbw_bytes_per_s=result.busbw, size_bytes=result.bytes,
        link_ceiling_bytes_per_s=_link_ceiling(node, placement), hardware=node.hardware, **axes)


def _sizes(sweep) -> list:
    return [{"bytes": r.bytes, "wrong_by_rank": r.wrong_by_rank, "first_bad_by_rank": r.first_bad_by_rank}
            for r in sweep.results]


@pytest.mark.work(SWEEP)
@pytest.mark.placements(*COLLECTIVE_CLASSES)
@pytest.mark.parametrize("op", OPS)
def test_result_correct(node, measurements, placement, op, collective_worker, record):
    """Every element of every rank's output is what the collective must produce, at every size."""
    sweep = measurements.sweep(placement, op, collective_worker)
    verdict = record(checks.collectives.collective_correct(
        node.thresholds, op=op, placement=placement.id, sizes=_sizes(sweep), error=sweep.error))
    assert verdict.ok, verdict.message


@pytest.mark.work(SWEEP, BENCHMARK)
@device_timed
@pytest.mark.placements(*COLLECTIVE_CLASSES)
@pytest.mark.parametrize("op", OPS)
def test_busbw(node, measurements, placement, op, collective_worker, benchmark, busbw_rounds, record):
    """Bus bandwidth at the floor size within the limits for (class, op, GPU count)."""
    result = _at_floor_size(node, record, measurements.sweep(placement, op, collective_worker))
    verdict = record(_busbw_verdict(node, placement, op, result))
    # Nightly regression: each benchmark round is `iters` back-to-back collectives at the floor
    # size, timed on the device (slowest rank), so pytest-benchmark compares device time. The sweep
    # timed just that at the floor size (its eager calls): it is the first round, the others are new,
    # made only where the run keeps or compares them (busbw_rounds).
    benchmark.extra_info.update({"placement": placement.id, "op": op, "bytes": result.bytes,
                                 "busbw_GBps": round(result.busbw / 1e9, 2), "algbw_GBps": round(result.algbw / 1e9, 2)})
    settings = node.thresholds.collective_settings(node.simulated)
    time_rounds(benchmark, lambda: measurements.benchmark_round(placement, op, result.bytes),
                busbw_rounds, measured=swept_round(result, settings))
    assert verdict.ok, verdict.message


# Each op's further dtypes and reductions (wirecheck.vocab.ops.FURTHER_AXES), one test each: a wrong bf16 max
# is named as such. Where the backend refuses one (gloo: avg in some torch versions), it says so: not measured.
# On each class's largest placement, over the node's own wires (AXIS_CLASSES): every wire is judged by each op's
# first dtype and reduction on every placement at every size; the further ones check NCCL's kernels per dtype and
# reduction, which a class's wires share. The host path's classes beside NVLink (forced_pcie: the NVLink pair
# sent over the host; cross_quad) are left to their first: on an 8x H200 NVL node every placement's 39 further
# combinations priced 6.9 of acceptance's minutes, the host path's largest alone 1.7 (wirecheck plan).
@pytest.mark.work(AXIS_SWEEP)
@pytest.mark.placements(*AXIS_CLASSES, one_per_class=True)
@pytest.mark.parametrize("axes", FURTHER_AXES, ids=str)
def test_axis_result_correct(node, measurements, placement, axes, collective_worker, record):
    """Every element where the result lives is what the op at this dtype and reduction must produce."""
    sweep = measurements.axis_sweep(placement, axes, collective_worker)
    verdict = record(checks.collectives.collective_correct(
        node.thresholds, op=axes.op, placement=placement.id, sizes=_sizes(sweep), error=sweep.error,
        dtype=axes.dtype, reduction=axes.reduction, refused=sweep.refused))
    assert verdict.ok, verdict.message


@pytest.mark.work(AXIS_SWEEP)
@pytest.mark.placements(*AXIS_CLASSES, one_per_class=True)
@pytest.mark.parametrize("axes", FURTHER_AXES, ids=str)
def test_axis_busbw(node, measurements, placement, axes, collective_worker, record):
    """Bus bandwidth at the floor size at this dtype and reduction, against the op's limits as
    collectives.axes_floor says."""
    sweep = measurements.axis_sweep(placement, axes, collective_worker)
    at = {"dtype": axes.dtype, "reduction": axes.reduction}
    if sweep.refused:
        verdict = record(checks.collectives.busbw(
            node.thresholds, op=axes.op, placement=placement.id, placement_class=placement.klass,
            n_gpus=placement.n_gpus, simulated=node.simulated, busbw_bytes_per_s=None,
            size_bytes=node.thresholds.collective_settings(node.simulated).floor_size, link_ceiling_bytes_per_s=None,
            refused=sweep.refused, **at))
    else:
        verdict = record(_busbw_verdict(node, placement, axes.op, _at_floor_size(node, record, sweep), **at))
    assert verdict.ok, verdict.message


# The quick level (before each job): one all_reduce per placement class, on the class's largest placement,
# at the floor size alone: the size sweep, the other collectives and the benchmark rounds are acceptance's.
@pytest.mark.work(FLOOR_SWEEP)
@pytest.mark.levels("quick")
@pytest.mark.placements(*COLLECTIVE_CLASSES, one_per_class=True)
def test_large_all_reduce_correct(node, measurements, placement, collective_worker, record):
    """Every element of every rank's output of one all_reduce at the floor size is what it must be."""
    sweep = measurements.sweep(placement, "all_reduce", collective_worker, floor_only=True)
    verdict = record(checks.collectives.collective_correct(
        node.thresholds, op="all_reduce", placement=placement.id, sizes=_sizes(sweep), error=sweep.error))
    assert verdict.ok, verdict.message


@pytest.mark.work(FLOOR_SWEEP)
@pytest.mark.levels("quick")
@pytest.mark.placements(*COLLECTIVE_CLASSES, one_per_class=True)
def test_large_all_reduce_busbw(node, measurements, placement, collective_worker, record):
    """That all_reduce's bus bandwidth within the limits for (class, all_reduce, GPU count)."""
    result = _at_floor_size(node, record, measurements.sweep(placement, "all_reduce", collective_worker, floor_only=True))
    verdict = record(_busbw_verdict(node, placement, "all_reduce", result))
    assert verdict.ok, verdict.message


@pytest.mark.work(SWEEP, TWIN_SWEEP)
@pytest.mark.placements(CLASS_FORCED_PCIE)
def test_nvlink_worth_it(node, measurements, placement, collective_worker, record):
    """The wire check: the same GPUs must be much faster with NCCL's NVLink path than without."""
    if node.simulated:
        pytest.skip("simulation: gloo on CPU has no NVLink to compare against the host path")
    fast = nvlink_twin_or_skip(node, placement)
    slow = _at_floor_size(node, record, measurements.sweep(placement, "all_reduce", collective_worker))
    quick = _at_floor_size(node, record, measurements.sweep(fast, "all_reduce", collective_worker))
    verdict = record(checks.collectives.wire_check(
        node.thresholds, placement=placement.id, nvlink_placement=fast.id, nvlink_busbw_bytes_per_s=quick.busbw,
        host_path_busbw_bytes_per_s=slow.busbw,
        nccl_p2p_env={k: v for k, v in os.environ.items() if k.startswith("NCCL_P2P")}))
    assert verdict.ok, verdict.message


@pytest.mark.work(SWEEP)
@pytest.mark.placements(CLASS_PAIR)
def test_pair_busbw(node, measurements, placement, collective_worker, record):
    """Each NVLink pair's all_reduce busbw against the per-pair floor."""
    if node.simulated:
        pytest.skip("simulation: CPU ranks have no links; per-pair checks need the real ones")
    result = _at_floor_size(node, record, measurements.sweep(placement, "all_reduce", collective_worker))
    verdict = record(_busbw_verdict(node, placement, "all_reduce", result, klass=CLASS_PAIR))
    assert verdict.ok, verdict.message


@pytest.mark.work(PAIR_SWEEPS, SWEEP)
@pytest.mark.placements(CLASS_PAIR)
def test_pair_vs_median(node, measurements, placement, collective_worker, record):
    """One slow link stands out: a pair far below the median of all pairs with its NV# is named."""
    if node.simulated:
        pytest.skip("simulation: CPU ranks have no links to compare")
    topo = node.topology
    nv = topo.nv_between(*placement.gpus)
    pairs = [p for p in node.placements if p.klass == CLASS_PAIR and topo.nv_between(*p.gpus) == nv]
    busbw = {}
    for p in pairs:
        sweep = measurements.sweep(p, "all_reduce", collective_worker)
        if not sweep.error:
            busbw[p.id] = _at_floor_size(node, record, sweep).busbw
    require(record, "all_reduce sweep", placement, measurements.sweep(placement, "all_reduce", collective_worker))
    verdict = record(checks.collectives.pair_spread(node.thresholds, placement=placement.id, nv=nv,
                                                    pairs_busbw_bytes_per_s=busbw))
    assert verdict.ok, verdict.message


@pytest.mark.work(SWEEP, INNER_PAIR_SWEEP)
@pytest.mark.placements("nvl_quad")
def test_quad_beats_pair(node, measurements, placement, collective_worker, record):
    """A full NVL quad lights all 18 links; a pair inside it only 6: the quad must be far faster."""
    if node.simulated:
        pytest.skip("simulation: CPU ranks have no NVLink groups")
    inner = [p for p in node.placements if p.klass == "nvl_pair" and set(p.gpus) <= set(placement.gpus)]
    if not inner:
        pytest.skip(f"no nvl_pair inside {placement.id}")
    quad = _at_floor_size(node, record, measurements.sweep(placement, "all_reduce", collective_worker))
    pair = _at_floor_size(node, record, measurements.sweep(inner[0], "all_reduce", collective_worker))
    verdict = record(checks.collectives.group_scaling(
        node.thresholds, placement=placement.id, pair_placement=inner[0].id, quad_busbw_bytes_per_s=quad.busbw,
        pair_busbw_bytes_per_s=pair.busbw))
    assert verdict.ok, verdict.message


def _curve(sweep) -> list:
    return [{"bytes": r.bytes, "time_s": r.time_s, "busbw": r.busbw, "path": getattr(r, "path", ""),
             "graph_note": getattr(r, "graph_note", None)} for r in sweep.results]


@pytest.mark.work(SWEEP)
@pytest.mark.placements(*COLLECTIVE_CLASSES)
@pytest.mark.parametrize("op", OPS)
def test_small_message_latency(node, measurements, placement, op, collective_worker, record):
    """Small messages are fast: the median time per call up to latency.up_to stays under the ceiling."""
    sweep = measurements.sweep(placement, op, collective_worker)
    require(record, f"{op} sweep", placement, sweep)
    verdict = record(checks.latency.small_message_latency_check(
        node.thresholds, op=op, placement=placement.id, placement_class=placement.klass, n_gpus=placement.n_gpus,
        simulated=node.simulated, curve=_curve(sweep), hardware=node.hardware))
    assert verdict.ok, verdict.message


@pytest.mark.work(SWEEP)
@pytest.mark.placements(*COLLECTIVE_CLASSES)
@pytest.mark.parametrize("op", OPS)
def test_half_peak_size(node, measurements, placement, op, collective_worker, record):
    """n½: busbw reaches half its peak by a size under the ceiling (slow small messages push it up)."""
    sweep = measurements.sweep(placement, op, collective_worker)
    require(record, f"{op} sweep", placement, sweep)
    verdict = record(checks.latency.half_peak_size_check(
        node.thresholds, op=op, placement=placement.id, placement_class=placement.klass, n_gpus=placement.n_gpus,
        simulated=node.simulated, curve=_curve(sweep), hardware=node.hardware))
    assert verdict.ok, verdict.message
