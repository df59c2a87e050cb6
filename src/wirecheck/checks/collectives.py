"""Collective checks: correctness at every size, bus bandwidth against the class's limits,
the wire check, per-pair spread and group scaling; and the limits they read, declared.

Bandwidths come in and are judged in bytes/s; verdicts record GB/s (1e9 B/s, as nccl-tests).
"""

from __future__ import annotations

import statistics

from dataclasses import dataclass, replace
from types import MappingProxyType

from wirecheck.checks import check
from wirecheck.checks.words import Words
from wirecheck.core.peer_stats import RULE as PEERS_RULE
from wirecheck.core.quantity import format_bw
from wirecheck.core.verdict import Verdict, at_least, at_most, no_problems, skip, within
from wirecheck.node.hardware import Hardware
from wirecheck.thresholds import plausible
from wirecheck.thresholds.declared import Rule
from wirecheck.thresholds.fields import Call, Qty, Share, Source, spec, valued
from wirecheck.thresholds.limits import COUNT, Axis, Entry, Limit, Table
from wirecheck.thresholds.yaml_reader import _At
from wirecheck.vocab.ops import OPS
from wirecheck.vocab.ops import axes as op_axes
from wirecheck.vocab.placements import (CLASS_CROSS_QUAD, CLASS_FORCED_PCIE, CLASS_NETWORK, CLASS_PCIE, CLASS_SINGLE,
                                        CLASSES)


# --- the limits the collective checks read ----------------------------------------------------------------

CLASS = Axis("klass", lambda: CLASSES, "placement class", "{what}s are keyed by placement class")
OP = Axis("op", lambda: OPS, "op", "ops are")
# Every class with collectives must be written (maybe {}): a class left out by accident would judge nothing.
FLOOR_CLASSES = lambda: tuple(c for c in CLASSES if c != CLASS_SINGLE)  # noqa: E731 (one GPU has no collective)
# Placement classes whose traffic rides PCIe: their derived floor comes from the GPU's PCIe link.
PCIE_CLASSES = (CLASS_PCIE, CLASS_CROSS_QUAD, CLASS_FORCED_PCIE)


def _efficiency(of: str):
    """{efficiency: "60 %", source: ...} -> (the share of `of`, its source)."""
    def read_pair(at: _At) -> tuple[float, str]:
        f = at.fields("efficiency and source", required={"efficiency": '"60 %"', "source": Source.example})
        return Share('"60 %"', f"a floor cannot exceed {of}; write at most 100 %")(f["efficiency"]), f["source"].source()
    return read_pair


def _per_op(at: _At) -> MappingProxyType:
    return MappingProxyType({op: _efficiency("the link ceiling")(op_at) for op, op_at in OP.read(at, "").items()})


@dataclass(frozen=True)
class DerivedFloor:
    """The busbw floor where the table has none: a share of the link ceiling (min NV# x per-link speed), per op
    where it says so, and of the GPU's PCIe link one way for the PCIe paths."""

    WHAT = "the derived busbw floor"
    efficiency: float = spec(Share('"50 %"', "a floor cannot exceed the link ceiling; write at most 100 %"))
    source: str = spec(Source())
    yaml_path: str
    ops: MappingProxyType = spec(Call('{all_reduce: {efficiency: "60 %", source: ...}}', _per_op),
                                 default_factory=dict)  # op -> (efficiency, source)
    pcie: tuple[float, str] | None = spec(Call('{efficiency: "30 %", source: ...}  (of the GPU\'s PCIe link, one way)',
                                               _efficiency("the PCIe link")), default=None)

    def for_op(self, op: str) -> tuple[float, str, str]:
        """(efficiency, its source, its YAML path) for `op`."""
        if op in self.ops:
            eff, why = self.ops[op]
            return eff, why, f"{self.yaml_path}.ops.{op}"
        return self.efficiency, self.source, self.yaml_path


def _derived_busbw(th, names: tuple, n_gpus: int, hardware, fell: str,
                   ceiling: float | None = None) -> tuple[Limit | None, str]:
    """No table entry: NVLink classes from `ceiling` (min NV# of the placement x per-link speed), the PCIe
    classes from the GPU's PCIe link (`hardware`), the network from the NICs' line rate."""
    klass, op = names
    unmatched, derived = (f" ({fell})" if fell else ""), th.derived_floor
    if klass in PCIE_CLASSES:
        peak, how = hardware.pcie_peak() if hardware is not None else (None, "no PCIe peak: the node's hardware is unknown")
        if peak is None or derived.pcie is None:
            missing = how if peak is None else f"no {derived.yaml_path}.pcie efficiency in the file"
            return None, f"no busbw floor for {klass}/{op}/{n_gpus} GPUs{unmatched}; {missing}"
        eff, why = derived.pcie
        # cross_quad and forced_pcie must stay in PCIe territory: above the link, the traffic took NVLink.
        top = peak if klass in (CLASS_CROSS_QUAD, CLASS_FORCED_PCIE) else None
        return Limit(min=peak * eff, max=top, yaml_path=f"{derived.yaml_path}.pcie", rule="derived",
                     source=(f"derived: {eff * 100:g} % of {how}" + (", at most the link" if top else "")
                             + f" (no table entry for {klass}/{op}/{n_gpus} GPUs{unmatched}; efficiency: {why})")), ""
    if not ceiling:
        return None, (f"no busbw floor for {klass}/{op}/{n_gpus} GPUs{unmatched} and no link ceiling "
                      "to derive one (NVML gave no NV# or per-link speed)")
    if klass == CLASS_NETWORK:  # across nodes the ceiling is the NICs' line rate, not NVLink: its own efficiency
        rule = th.network.derived_floor
        eff, what, why, cited = rule.efficiency, "the NICs' line rate", rule.source, rule.yaml_path
    else:
        (eff, why, cited), what = derived.for_op(op), "the link ceiling (min NV# x per-link speed)"
    return Limit(min=ceiling * eff, max=None, yaml_path=cited, rule="derived",
                 source=(f"derived: {eff * 100:g} % of {what} {format_bw(ceiling)} "
                         f"(no table entry for {klass}/{op}/{n_gpus} GPUs{unmatched}; efficiency: {why})")), ""


SIMULATED_FLOORS = Table("collectives.simulated_floors", (OP, COUNT), Entry("bandwidth"), "busbw floor", rule="simulated",
                         cover=("op", 'add {name}: {{any: {{min: "0.005 GB/s", source: ...}}}} (or "*" for every op)'),
                         example="{all_reduce: {any: {...}}, ...}")
FLOORS = Table("collectives.floors", (CLASS, OP, COUNT), Entry("bandwidth"), "busbw floor", simulated=SIMULATED_FLOORS,
               none_simulated="no simulated busbw floor for {op}", derived=_derived_busbw, present=FLOOR_CLASSES,
               plausible=lambda at, table, values: plausible.check_busbw(at, table, values["profiles"]),  # the wire it judges
               example="{nvswitch: {...}, ...}")
DERIVED = Rule("collectives.derived_floor", DerivedFloor, '{efficiency: "50 %", source: ...}')
WIRE_CHECK = Rule("collectives.wire_check", valued("WireCheck", "min_ratio", Qty('"8 x"', "ratio"),
                                                   "NVLink busbw over the forced host path's"), '{min_ratio: "8 x", source: ...}')
PAIR_SPREAD_RULE = Rule("collectives.pair_spread", valued("PairSpread", "max_below_median", Qty('"10 %"', "percent")),
                        '{max_below_median: "10 %", source: ...}')
GROUP_SCALING_RULE = Rule("collectives.group_scaling", valued("GroupScaling", "quad_over_pair_min", Qty('"2 x"', "ratio")),
                          '{quad_over_pair_min: "2 x", source: ...}')


@dataclass(frozen=True)
class AxesFloor:
    """The busbw limit of an op's dtypes and reductions past its first (wirecheck.vocab.ops.Axes): `share`
    of the op's own floor; its ceiling (a PCIe path's link) as it is."""

    WHAT = "share and source"
    share: float = spec(Share('"100 %"', "a floor cannot exceed the op's floor; write at most 100 %"))
    source: str = spec(Source())
    yaml_path: str

    def apply(self, limit: Limit, words: str, op: str) -> Limit:
        share = "the" if self.share == 1 else f"{self.share * 100:g} % of the"
        return replace(limit, min=None if limit.min is None else limit.min * self.share,
                       source=f"{limit.source}; {words}: {share} {op} floor, by {self.yaml_path}")


# Optional: a file older than the axes judges none of an op's further dtypes and reductions, and says so.
AXES_FLOOR = Rule("collectives.axes_floor", AxesFloor,
                  '{share: "100 %", source: ...}  (the floor of an op\'s further dtypes and reductions)', optional=True)

_BANDWIDTH_TODO = ("compare `wirecheck topo` with the expected wiring (a link down halves a pair), check "
                   "`nvidia-smi nvlink -s` and `nvidia-smi -q -d CLOCK,PERFORMANCE` (on the host path, pcie and "
                   "forced_pcie: `nvidia-smi -q -d PCIE` for the generation and width of the link, and the slot), then "
                   "run `pytest -k <placement> -v` again for the size sweep")

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


@check("busbw", words=BUSBW, limits=(FLOORS, SIMULATED_FLOORS, DERIVED, AXES_FLOOR))
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
    return within(what, placement, busbw_bytes_per_s, limit, "GB/s")


@check("wire_check", words=WIRE, limits=(WIRE_CHECK,))
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


@check("pair_spread", words=PAIR_SPREAD, limits=(PAIR_SPREAD_RULE,))
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


@check("group_scaling", words=GROUP_SCALING, limits=(GROUP_SCALING_RULE,))
def group_scaling(thresholds, *, placement: str, pair_placement: str, quad_busbw_bytes_per_s: float,
                  pair_busbw_bytes_per_s: float) -> Verdict:
    """A full NVL quad lights all 18 links; a pair inside it only 6: the quad must be far faster."""
    rule = thresholds.group_scaling
    what = GROUP_SCALING.judged(quad=quad_busbw_bytes_per_s, pair_placement=pair_placement,
                                pair=pair_busbw_bytes_per_s)
    return at_least(what, placement, quad_busbw_bytes_per_s / pair_busbw_bytes_per_s, rule.quad_over_pair_min, "x",
                    rule.source, rule.yaml_path, rule="measured")
