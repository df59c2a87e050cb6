"""Collective bus bandwidth and correctness on every placement (nccl-tests conventions).

Every size of the sweep is checked element by element; bandwidth floors apply at the
floor size from thresholds.yaml. The sweep is measured once per (placement, op) and shared
by the checks below.
"""

from __future__ import annotations

import statistics

import pytest

from pytest_wirecheck.measurements import nvlink_twin_or_skip, require
from wirecheck.checks.latency import half_peak_check, latency_check
from wirecheck.placement import CLASS_FORCED_PCIE, CLASS_PAIR
from wirecheck.quantity import format_bw, format_bytes
from wirecheck.verdict import judge, judge_ratio, limit_dict

OPS = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all")
BANDWIDTH_CLASSES = ("nvswitch", "nvl_pair", "nvl_quad", "nvl_group", "cross_quad", "pcie", "forced_pcie")


def _link_ceiling(node, placement) -> float | None:
    """min NV# over the placement's pairs x per-link speed (bytes/s), when both are known."""
    if not placement.nvlink:
        return None
    topo = node.topology
    pos = {g.index: p for p, g in enumerate(topo.gpus)}
    speeds = [link.speed_mbps for g in placement.gpus for link in topo.gpus[pos[g]].nvlinks if link.active and link.speed_mbps]
    per_link = min(speeds) * 1e6 if speeds else (node.profile.nvlink_speed if node.profile else None)
    if not per_link:
        return None
    links = min(topo.nv(pos[a], pos[b]) for a in placement.gpus for b in placement.gpus if a != b)
    return links * per_link


def _floor_result(node, sweep):
    size = node.thresholds.collective_settings(node.simulated).floor_size
    result = sweep.at(size)
    if result is None:
        pytest.fail(f"{sweep.op} on {sweep.placement.id}: no measurement at the floor size {format_bytes(size)} "
                    "(thresholds.yaml collectives: floor_size must be one of sizes)", pytrace=False)
    return result


@pytest.mark.placements(*BANDWIDTH_CLASSES)
@pytest.mark.parametrize("op", OPS)
def test_result_correct(measurements, placement, op, collective_worker, record):
    """Every element of every rank's output is what the collective must produce, at every size."""
    sweep = measurements.sweep(placement, op, collective_worker)
    bad = [r for r in sweep.results if not r.ok]
    lines = [
        f"{format_bytes(r.bytes)}: rank {rank} has {n} wrong elements (first at index {r.first_bad_by_rank.get(rank)})"
        if n else f"{format_bytes(r.bytes)}: rank {rank} was not checked"
        for r in bad for rank, n in sorted(r.wrong_by_rank.items()) if n is None or n
    ]
    record("correctness", f"{op} result", value=sum(r.wrong or 0 for r in sweep.results),
           unit="wrong elements", verdict="fail" if bad or sweep.error else "pass",
           details={"sizes": [r.bytes for r in sweep.results], "errors": lines})
    assert not bad, f"{op} on {placement.id} returned wrong data:\n" + "\n".join(lines)
    require(sweep)


@pytest.mark.placements(*BANDWIDTH_CLASSES)
@pytest.mark.parametrize("op", OPS)
def test_busbw(node, measurements, worker_pool, placement, op, collective_worker, benchmark, record):
    """Bus bandwidth at the floor size within the limits for (class, op, GPU count)."""
    sweep = measurements.sweep(placement, op, collective_worker)
    require(sweep)
    result = _floor_result(node, sweep)
    limit = node.thresholds.busbw_limit(placement.klass, op, placement.n_gpus, node.simulated, _link_ceiling(node, placement))
    if limit is None:
        pytest.skip(f"no busbw floor for {placement.klass}/{op}/{placement.n_gpus} GPUs in {node.thresholds.path} "
                    "and no link ceiling to derive one")
    settings = node.thresholds.collective_settings(node.simulated)
    # Nightly regression: each round runs `iters` back-to-back collectives at the floor size,
    # long enough that the round trip to the workers is noise.
    group = worker_pool.shared(placement)
    benchmark.extra_info.update({"placement": placement.id, "op": op, "bytes": result.bytes,
                                 "busbw_GBps": round(result.busbw / 1e9, 2), "algbw_GBps": round(result.algbw / 1e9, 2)})
    benchmark.pedantic(
        group.run,
        args=("wirecheck.collectives:measure_loop", {"op": op, "size": result.bytes, "iters": settings.iters}),
        kwargs={"timeout_s": settings.timeout_s, "what": f"{op} benchmark at {format_bytes(result.bytes)}"},
        rounds=settings.benchmark_rounds,
        iterations=1,
    )
    verdict = judge(result.busbw, limit, f"{op} busbw at {format_bytes(result.bytes)}", placement.id, format_bw)
    record("bandwidth", f"{op} busbw at {format_bytes(result.bytes)}", value=result.busbw / 1e9, unit="GB/s",
           limit=limit_dict(limit), verdict=verdict.word, details={"algbw_GBps": result.algbw / 1e9})
    assert verdict.ok, verdict.message


@pytest.mark.placements(CLASS_FORCED_PCIE)
def test_nvlink_worth_it(node, measurements, placement, collective_worker, record):
    """The wire check: the same GPUs must be much faster with NCCL's NVLink path than without."""
    if node.simulated:
        pytest.skip("simulation: gloo on CPU has no NVLink to compare against the host path")
    fast = nvlink_twin_or_skip(node, placement)
    slow_sweep, fast_sweep = measurements.sweep(placement, "all_reduce", collective_worker), measurements.sweep(fast, "all_reduce", collective_worker)
    require(slow_sweep)
    require(fast_sweep)
    slow, quick = _floor_result(node, slow_sweep), _floor_result(node, fast_sweep)
    rule = node.thresholds.wire_check
    ratio = quick.busbw / slow.busbw
    verdict = judge_ratio(ratio, rule.min_ratio, f"NVLink vs host path, all_reduce busbw {format_bw(quick.busbw)} "
                          f"({fast.id}) vs {format_bw(slow.busbw)}", placement.id, rule.source, rule.yaml_path)
    record("wire_check", "all_reduce NVLink/host-path ratio", value=ratio, unit="x",
           limit={"min": rule.min_ratio, "source": rule.source, "yaml_path": rule.yaml_path}, verdict=verdict.word)
    hint = ("\nIs NVLink unused? Check the environment for NCCL_P2P_DISABLE / NCCL_P2P_LEVEL "
            f"(pytest process env: {', '.join(f'{k}={v}' for k, v in sorted(_nccl_env().items())) or 'none'})")
    assert verdict.ok, verdict.message + hint


def _nccl_env() -> dict:
    import os

    return {k: v for k, v in os.environ.items() if k.startswith("NCCL_P2P")}


@pytest.mark.placements(CLASS_PAIR)
def test_pair_busbw(node, measurements, placement, collective_worker, record):
    """Each NVLink pair's all_reduce busbw against the per-pair floor."""
    if node.simulated:
        pytest.skip("simulation: CPU ranks have no links; per-pair checks need the real ones")
    sweep = measurements.sweep(placement, "all_reduce", collective_worker)
    require(sweep)
    result = _floor_result(node, sweep)
    limit = node.thresholds.busbw_limit(CLASS_PAIR, "all_reduce", 2, node.simulated, _link_ceiling(node, placement))
    if limit is None:
        pytest.skip(f"no pair floor in {node.thresholds.path}")
    verdict = judge(result.busbw, limit, f"all_reduce busbw at {format_bytes(result.bytes)}", placement.id, format_bw)
    record("bandwidth", "pair all_reduce busbw", value=result.busbw / 1e9, unit="GB/s", limit=limit_dict(limit), verdict=verdict.word)
    assert verdict.ok, verdict.message


@pytest.mark.placements(CLASS_PAIR)
def test_pair_vs_median(node, measurements, placement, collective_worker, record):
    """One slow link stands out: a pair far below the median of all pairs of its class is named."""
    if node.simulated:
        pytest.skip("simulation: CPU ranks have no links to compare")
    pairs = [p for p in node.placements if p.klass == CLASS_PAIR and node.topology.nv(p.gpus[0], p.gpus[1]) == node.topology.nv(*placement.gpus)]
    if len(pairs) < 3:
        pytest.skip(f"{len(pairs)} pair(s) with NV{node.topology.nv(*placement.gpus)}: a median needs at least 3")
    busbw = {}
    for p in pairs:
        sweep = measurements.sweep(p, "all_reduce", collective_worker)
        if not sweep.error:
            busbw[p.id] = _floor_result(node, sweep).busbw
    mine = busbw.get(placement.id)
    if mine is None:
        require(measurements.sweep(placement, "all_reduce", collective_worker))
    median = statistics.median(busbw.values())
    rule = node.thresholds.pair_spread
    below = 1 - mine / median
    ok = below <= rule.max_below_median
    record("pair_spread", "all_reduce busbw below median pair", value=below * 100, unit="%",
           limit={"max": rule.max_below_median * 100, "source": rule.source, "yaml_path": rule.yaml_path},
           verdict="pass" if ok else "fail", details={"median_GBps": median / 1e9, "pairs_GBps": {k: v / 1e9 for k, v in busbw.items()}})
    assert ok, (f"{placement.id}: all_reduce busbw {format_bw(mine)} is {below:.0%} below the median pair {format_bw(median)} "
                f"(allowed {rule.max_below_median:.0%}; {rule.yaml_path}; source: {rule.source}): suspect a degraded link on "
                f"GPU {placement.gpus[0]} or {placement.gpus[1]}")


@pytest.mark.placements("nvl_quad")
def test_quad_beats_pair(node, measurements, placement, collective_worker, record):
    """A full NVL quad lights all 18 links; a pair inside it only 6: the quad must be far faster."""
    if node.simulated:
        pytest.skip("simulation: CPU ranks have no NVLink groups")
    inner = [p for p in node.placements if p.klass == "nvl_pair" and set(p.gpus) <= set(placement.gpus)]
    if not inner:
        pytest.skip(f"no nvl_pair inside {placement.id}")
    quad = measurements.sweep(placement, "all_reduce", collective_worker)
    pair = measurements.sweep(inner[0], "all_reduce", collective_worker)
    require(quad)
    require(pair)
    q, p = _floor_result(node, quad).busbw, _floor_result(node, pair).busbw
    rule = node.thresholds.group_scaling
    verdict = judge_ratio(q / p, rule.quad_over_pair_min, f"quad {format_bw(q)} over pair {inner[0].id} {format_bw(p)}",
                          placement.id, rule.source, rule.yaml_path)
    record("group_scaling", "quad/pair all_reduce busbw", value=q / p, unit="x",
           limit={"min": rule.quad_over_pair_min, "source": rule.source, "yaml_path": rule.yaml_path}, verdict=verdict.word)
    assert verdict.ok, verdict.message


@pytest.mark.placements(*BANDWIDTH_CLASSES)
@pytest.mark.parametrize("op", OPS)
def test_small_message_latency(node, measurements, placement, op, collective_worker, record):
    """Small messages are fast: the median time per call up to latency.up_to stays under the ceiling."""
    sweep = measurements.sweep(placement, op, collective_worker)
    require(sweep)
    limit = node.thresholds.latency_limit(placement.klass, op, placement.n_gpus, node.simulated)
    check = latency_check(sweep.results, limit, node.thresholds.latency.up_to, op, placement.id)
    record("latency", f"{op} small-message latency", value=None if check.value is None else check.value * 1e6, unit="µs",
           limit=limit_dict(limit), verdict=check.verdict.word if check.verdict else "skip", details=check.details())
    if check.verdict is None:
        pytest.skip(check.skip_reason)
    assert check.verdict.ok, check.verdict.message


@pytest.mark.placements(*BANDWIDTH_CLASSES)
@pytest.mark.parametrize("op", OPS)
def test_half_peak_size(node, measurements, placement, op, collective_worker, record):
    """n½: busbw reaches half its peak by a size under the ceiling (slow small messages push it up)."""
    sweep = measurements.sweep(placement, op, collective_worker)
    require(sweep)
    limit = node.thresholds.half_peak_limit(placement.klass, op, placement.n_gpus, node.simulated)
    check = half_peak_check(sweep.results, limit, node.thresholds.half_peak.fraction, op, placement.id)
    record("half_peak", f"{op} n½", value=check.value, unit="B", limit=limit_dict(limit),
           verdict=check.verdict.word if check.verdict else "skip", details=check.details())
    if check.verdict is None:
        pytest.skip(check.skip_reason)
    assert check.verdict.ok, check.verdict.message
