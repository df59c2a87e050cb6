"""Collective checks: correctness at every size, bus bandwidth against the class's limits,
the wire check, per-pair spread and group scaling.

Bandwidths come in and are judged in bytes/s; verdicts record GB/s (1e9 B/s, as nccl-tests).
"""

from __future__ import annotations

import statistics

from wirecheck.checks import check
from wirecheck.core.peer_stats import RULE as PEERS_RULE
from wirecheck.core.quantity import format_bw, format_bytes
from wirecheck.core.verdict import Verdict, at_least, at_most, no_problems, skip, within
from wirecheck.node.hardware import Hardware
from wirecheck.vocab.ops import axes as op_axes

GB = 1e9


@check("collective_correct")
def collective_correct(thresholds, *, op: str, placement: str, sizes: list, error: str | None,
                       dtype: str | None = None, reduction: str | None = None, refused: str | None = None) -> Verdict:
    """Every element of every rank's output where the result lives is what the collective must produce,
    at every size.

    `sizes`: [{"bytes", "wrong_by_rank": {rank: n or None}, "first_bad_by_rank": {rank: index}}] (the ranks
    holding the result); `error`: the hang or crash that stopped the sweep, if any; `dtype`, `reduction`:
    the axes measured (None: the op's first, all a record before the axes measured); `refused`: why the
    backend would not run them (not measured: a skip).
    """
    a = op_axes(op, dtype, reduction)
    what = f"{a.words} result"
    if refused:
        return skip(what, placement, f"not measured: {refused}")
    problems = []
    for size in sizes:
        for rank, wrong in sorted(size["wrong_by_rank"].items(), key=lambda kv: int(kv[0])):
            if wrong is None:
                problems.append(f"{format_bytes(size['bytes'])}: rank {rank} was not checked")
            elif wrong:
                first = size["first_bad_by_rank"].get(rank, size["first_bad_by_rank"].get(str(rank)))
                problems.append(f"{format_bytes(size['bytes'])}: rank {rank} has {wrong} wrong elements (first at index {first})")
    if error:
        problems.append(error)
    wrong_total = sum(w or 0 for s in sizes for w in s["wrong_by_rank"].values())
    intro = f"{a.words} on {placement} returned wrong data" if wrong_total else f"{a.words} on {placement} did not complete"
    return no_problems(what, placement, problems, measured=wrong_total, unit="wrong elements", intro=intro)


@check("busbw")
def busbw(thresholds, *, op: str, placement: str, placement_class: str, n_gpus: int, simulated: bool,
          busbw_bytes_per_s: float | None, size_bytes: int, link_ceiling_bytes_per_s: float | None,
          hardware: dict | None = None, dtype: str | None = None, reduction: str | None = None,
          refused: str | None = None) -> Verdict:
    """Bus bandwidth at the floor size within the limits for (class, op, GPU count). `hardware`
    (wirecheck.node.hardware.Hardware.as_dict): which table entries apply, and the PCIe link for PCIe paths.
    `dtype`, `reduction`: the axes measured (None: the op's first); past the op's first, the op's limit as
    collectives.axes_floor says. `refused`: why the backend would not run them (not measured: a skip)."""
    a = op_axes(op, dtype, reduction)
    what = f"{a.words} busbw at {format_bytes(size_bytes)}"
    if refused:
        return skip(what, placement, f"not measured: {refused}")
    limit, why = thresholds.busbw_rule(placement_class, op, n_gpus, simulated, link_ceiling_bytes_per_s,
                                       Hardware.from_dict(hardware), a)
    if limit is None:
        return skip(what, placement, f"{why} in {thresholds.path}")
    return within(what, placement, busbw_bytes_per_s, limit, "bandwidth", "GB/s", scale=1 / GB)


@check("wire_check")
def wire_check(thresholds, *, placement: str, nvlink_placement: str, nvlink_busbw_bytes_per_s: float,
               host_path_busbw_bytes_per_s: float, nccl_p2p_env: dict) -> Verdict:
    """The same GPUs must be much faster with NCCL's NVLink path than without (all_reduce)."""
    rule = thresholds.wire_check
    ratio = nvlink_busbw_bytes_per_s / host_path_busbw_bytes_per_s
    env = ", ".join(f"{k}={v}" for k, v in sorted(nccl_p2p_env.items())) or "none"
    hint = ("\nIs NVLink unused? Check the environment for NCCL_P2P_DISABLE / NCCL_P2P_LEVEL "
            f"(pytest process env: {env})")
    what = (f"NVLink vs host path, all_reduce busbw {format_bw(nvlink_busbw_bytes_per_s)} ({nvlink_placement}) "
            f"vs {format_bw(host_path_busbw_bytes_per_s)}")
    return at_least(what, placement, ratio, rule.min_ratio, "x", rule.source, rule.yaml_path, hint=hint, rule="measured")


@check("pair_spread")
def pair_spread(thresholds, *, placement: str, nv: int, pairs_busbw_bytes_per_s: dict) -> Verdict:
    """One slow link stands out: a pair far below the median of the pairs with the same NV#."""
    what = "all_reduce busbw below the median pair"
    if len(pairs_busbw_bytes_per_s) < 3:
        return skip(what, placement, f"{len(pairs_busbw_bytes_per_s)} measured pair(s) with NV{nv}: a median needs at least 3")
    mine = pairs_busbw_bytes_per_s.get(placement)
    if mine is None:
        return skip(what, placement, "this pair was not measured")
    median = statistics.median(pairs_busbw_bytes_per_s.values())
    rule = thresholds.pair_spread
    below = 1 - mine / median
    hint = (f": all_reduce busbw {format_bw(mine)} vs median pair {format_bw(median)}; suspect a degraded link "
            f"on GPU {placement.removeprefix('pair-').replace('.', ' or GPU ')}")
    return at_most(what, placement, below * 100, rule.max_below_median * 100, "%", rule.source, rule.yaml_path,
                   fmt="percent", hint=hint, rule=PEERS_RULE)


@check("group_scaling")
def group_scaling(thresholds, *, placement: str, pair_placement: str, quad_busbw_bytes_per_s: float,
                  pair_busbw_bytes_per_s: float) -> Verdict:
    """A full NVL quad lights all 18 links; a pair inside it only 6: the quad must be far faster."""
    rule = thresholds.group_scaling
    what = (f"quad {format_bw(quad_busbw_bytes_per_s)} over pair {pair_placement} "
            f"{format_bw(pair_busbw_bytes_per_s)}")
    return at_least(what, placement, quad_busbw_bytes_per_s / pair_busbw_bytes_per_s, rule.quad_over_pair_min, "x",
                    rule.source, rule.yaml_path, rule="measured")
