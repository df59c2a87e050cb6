"""Collective checks: correctness at every size, bus bandwidth against the class's limits,
the wire check, per-pair spread and group scaling.

Bandwidths come in and are judged in bytes/s; verdicts record GB/s (1e9 B/s, as nccl-tests).
"""

from __future__ import annotations

import statistics

from wirecheck.checks import check
from wirecheck.checks.words import Words
from wirecheck.core.peer_stats import RULE as PEERS_RULE
from wirecheck.core.verdict import Verdict, at_least, at_most, no_problems, skip, within
from wirecheck.node.hardware import Hardware
from wirecheck.vocab.ops import axes as op_axes

GB = 1e9

_BANDWIDTH_TODO = ("compare `wirecheck topo` with the expected wiring (a link down halves a pair), check "
                   "`nvidia-smi nvlink -s` and `nvidia-smi -q -d CLOCK,PERFORMANCE`, then run `pytest -k "
                   "<placement> -v` again for the size sweep")

CORRECT = Words(
    what="{op} result",
    means="a collective returned wrong data: silent corruption on a GPU, a link or in NCCL",
    todo="drain the node; run `pytest -k <placement> -v` again to see which size and rank; check `nvidia-smi -q -d ECC` "
         "and dmesg for XIDs",
    say={"wrong": "{op} on {placement} returned wrong data",
         "incomplete": "{op} on {placement} did not complete",
         "refused": "not measured: {refused}",
         "unchecked": "{size_bytes:size}: rank {rank} was not checked",
         "wrong_elements": "{size_bytes:size}: rank {rank} has {wrong} wrong elements (first at index {first})"})
BUSBW = Words(
    what="{op} busbw at {size_bytes:size}",
    means="the GPUs of this placement move data slower than their fabric allows",
    todo=_BANDWIDTH_TODO,
    say={"no_limit": "{why} in {path}", "refused": "not measured: {refused}"})
WIRE = Words(
    what="NVLink vs host path, all_reduce busbw {nvlink:bandwidth} ({nvlink_placement}) vs {host:bandwidth}",
    means="NVLink is not much faster than the host path on the same GPUs: NCCL is not using NVLink, or a link is down",
    todo="check `nvidia-smi nvlink -s` and `nvidia-smi topo -m`; look for NCCL_P2P_DISABLE or NCCL_P2P_LEVEL in the "
         "environment; `pytest -k nccl_path` shows the path NCCL took",
    say={"environment": "the pytest process's NCCL_P2P variables: {env}"})
PAIR_SPREAD = Words(
    what="all_reduce busbw below the median pair",
    means="one GPU pair is much slower than the median pair: a link or a GPU is degraded",
    todo="`nvidia-smi nvlink -s -i <gpu>` on the pair's GPUs (links down, lower speed); reseat or replace the GPU or "
         "the bridge",
    say={"too_few": "{pairs} measured pair(s) with NV{nv}: a median needs at least 3",
         "not_measured": "this pair was not measured",
         "suspect": "all_reduce busbw {mine:bandwidth} against the median pair's {median:bandwidth}: suspect a "
                    "degraded link on GPU{a} or GPU{b}"})
GROUP_SCALING = Words(
    what="quad {quad:bandwidth} over pair {pair_placement} {pair:bandwidth}",
    means="a whole NVLink group is slower than a pair inside it allows: a link of the group is down or slow",
    todo="`nvidia-smi nvlink -s` on every GPU of the group; `pytest -k pair -v` names the slow pair")




@check("collective_correct", words=CORRECT)
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
    what = CORRECT.judged(op=a.words)
    if refused:
        return skip(what, placement, CORRECT.said("refused", refused=refused))
    problems = []
    for size in sizes:
        for rank, wrong in sorted(size["wrong_by_rank"].items(), key=lambda kv: int(kv[0])):
            if wrong is None:
                problems.append(CORRECT.said("unchecked", size_bytes=size["bytes"], rank=rank))
            elif wrong:
                first = size["first_bad_by_rank"].get(rank, size["first_bad_by_rank"].get(str(rank)))
                problems.append(CORRECT.said("wrong_elements", size_bytes=size["bytes"], rank=rank, wrong=wrong,
                                             first=first))
    if error:
        problems.append(error)
    wrong_total = sum(w or 0 for s in sizes for w in s["wrong_by_rank"].values())
    intro = CORRECT.said("wrong" if wrong_total else "incomplete", op=a.words, placement=placement)
    return no_problems(what, placement, problems, measured=wrong_total, unit="wrong elements", intro=intro)


@check("busbw", words=BUSBW)
def busbw(thresholds, *, op: str, placement: str, placement_class: str, n_gpus: int, simulated: bool,
          busbw_bytes_per_s: float | None, size_bytes: int, link_ceiling_bytes_per_s: float | None,
          hardware: dict | None = None, dtype: str | None = None, reduction: str | None = None,
          refused: str | None = None) -> Verdict:
    """Bus bandwidth at the floor size within the limits for (class, op, GPU count). `hardware`
    (wirecheck.node.hardware.Hardware.as_dict): which table entries apply, and the PCIe link for PCIe paths.
    `dtype`, `reduction`: the axes measured (None: the op's first); past the op's first, the op's limit as
    collectives.axes_floor says. `refused`: why the backend would not run them (not measured: a skip)."""
    a = op_axes(op, dtype, reduction)
    what = BUSBW.judged(op=a.words, size_bytes=size_bytes)
    if refused:
        return skip(what, placement, BUSBW.said("refused", refused=refused))
    limit, why = thresholds.busbw_rule(placement_class, op, n_gpus, simulated, link_ceiling_bytes_per_s,
                                       Hardware.from_dict(hardware), a)
    if limit is None:
        return skip(what, placement, BUSBW.said("no_limit", why=why, path=thresholds.path))
    return within(what, placement, busbw_bytes_per_s, limit, "bandwidth", "GB/s", scale=1 / GB)


@check("wire_check", words=WIRE)
def wire_check(thresholds, *, placement: str, nvlink_placement: str, nvlink_busbw_bytes_per_s: float,
               host_path_busbw_bytes_per_s: float, nccl_p2p_env: dict) -> Verdict:
    """The same GPUs must be much faster with NCCL's NVLink path than without (all_reduce)."""
    rule = thresholds.wire_check
    ratio = nvlink_busbw_bytes_per_s / host_path_busbw_bytes_per_s
    env = ", ".join(f"{k}={v}" for k, v in sorted(nccl_p2p_env.items())) or "none"
    what = WIRE.judged(nvlink=nvlink_busbw_bytes_per_s, nvlink_placement=nvlink_placement,
                       host=host_path_busbw_bytes_per_s)
    return at_least(what, placement, ratio, rule.min_ratio, "x", rule.source, rule.yaml_path,
                    hint=WIRE.said("environment", env=env), rule="measured")


@check("pair_spread", words=PAIR_SPREAD)
def pair_spread(thresholds, *, placement: str, nv: int, pairs_busbw_bytes_per_s: dict) -> Verdict:
    """One slow link stands out: a pair far below the median of the pairs with the same NV#."""
    what = PAIR_SPREAD.judged()
    if len(pairs_busbw_bytes_per_s) < 3:
        return skip(what, placement, PAIR_SPREAD.said("too_few", pairs=len(pairs_busbw_bytes_per_s), nv=nv))
    mine = pairs_busbw_bytes_per_s.get(placement)
    if mine is None:
        return skip(what, placement, PAIR_SPREAD.said("not_measured"))
    median = statistics.median(pairs_busbw_bytes_per_s.values())
    rule = thresholds.pair_spread
    below = 1 - mine / median
    a, _, b = placement.removeprefix("pair-").partition(".")  # a pair placement's id names its two GPUs
    return at_most(what, placement, below * 100, rule.max_below_median * 100, "%", rule.source, rule.yaml_path,
                   fmt="percent", hint=PAIR_SPREAD.said("suspect", mine=mine, median=median, a=a, b=b), rule=PEERS_RULE)


@check("group_scaling", words=GROUP_SCALING)
def group_scaling(thresholds, *, placement: str, pair_placement: str, quad_busbw_bytes_per_s: float,
                  pair_busbw_bytes_per_s: float) -> Verdict:
    """A full NVL quad lights all 18 links; a pair inside it only 6: the quad must be far faster."""
    rule = thresholds.group_scaling
    what = GROUP_SCALING.judged(quad=quad_busbw_bytes_per_s, pair_placement=pair_placement,
                                pair=pair_busbw_bytes_per_s)
    return at_least(what, placement, quad_busbw_bytes_per_s / pair_busbw_bytes_per_s, rule.quad_over_pair_min, "x",
                    rule.source, rule.yaml_path, rule="measured")
