"""Fleet checks: a node's record is there and complete, a node's key figure against its peers', and
the pair schedule's node-or-link attribution.

A node cleared by its own floors can still be slower than its peers: the fleet rule
(wirecheck.core.peer_stats) names it. Inputs are plain data (figures, the fleet's statistics, pair
bandwidths), so `wirecheck fleet report --json` keeps them and the same functions judge them again.
"""

from __future__ import annotations

from dataclasses import dataclass

from wirecheck.checks import check
from wirecheck.core.pair_schedule import pair_key
from wirecheck.core import render
from wirecheck.core.peer_stats import Below, Reference, below_median, below_reference, reference_of
from wirecheck.core.verdict import FAIL, PASS, Verdict, skip
from wirecheck.thresholds.declared import Rule
from wirecheck.thresholds.fields import Count, Nested, Qty, Share, Source, spec

KINDS = ("busbw", "throughput")
GB = 1e9


# --- the fleet rules: a node's figure against its peers' median -------------------------------------------


@dataclass(frozen=True)
class FleetRule:
    """A node's figure against its peers' median: named when it is below the median by more than `mad_k` x the
    peers' scaled MAD (1.4826 x median absolute deviation) and by more than `max_below_median` (a fraction).
    Both: MAD alone flags noise on a tight fleet, a percentage alone flags ordinary noise on a noisy figure."""

    WHAT = "fleet rule"
    max_below_median: float = spec(Share('"5 %"', "no node could ever be named; write less than 100 %", positive=False,
                                         below_one=True))
    mad_k: float = spec(Qty('"3 x"', "ratio"))
    source: str = spec(Source())
    yaml_path: str


_EXAMPLE = '{max_below_median: "5 %", mad_k: "3 x", source: ...}'


@dataclass(frozen=True)
class FleetRules:
    WHAT = "fleet rules per figure"
    busbw: FleetRule = spec(Nested(_EXAMPLE, FleetRule))  # collective busbw per placement/op at floor_size, NIC line rate
    throughput: FleetRule = spec(Nested(_EXAMPLE, FleetRule))  # training tokens/s per placement (wire) and strategy
    pairs: FleetRule = spec(Nested(_EXAMPLE, FleetRule))  # node pairs of the ring schedule against the median pair
    gpus: FleetRule = spec(Nested(_EXAMPLE, FleetRule))  # each GPU's HBM and GEMM figures against the fleet's others


@dataclass(frozen=True)
class FleetLimits:
    busbw: FleetRule
    throughput: FleetRule
    pairs: FleetRule
    min_nodes: int  # a median needs this many nodes (pairs) with the figure
    gpus: FleetRule


@dataclass(frozen=True)
class Fleet:
    WHAT = "fleet sections"
    min_nodes: int = spec(Count(minimum=3), "3")  # fewer than 3 values have no meaningful median to stand out from
    hardware: FleetRules = spec(Nested("{busbw: {...}, throughput: {...}, pairs: {...}, gpus: {...}}", FleetRules))
    simulated: FleetRules = spec(Nested("{busbw: {...}, throughput: {...}, pairs: {...}, gpus: {...}}", FleetRules))

    def modes(self, simulated: bool) -> FleetLimits:
        r = self.simulated if simulated else self.hardware
        return FleetLimits(r.busbw, r.throughput, r.pairs, self.min_nodes, r.gpus)


FLEET = Rule("fleet", Fleet, "{min_nodes: 3, hardware: {...}, simulated: {...}}")


# the display format of a fleet figure's unit (wirecheck.core.render.FORMATS)
FORMAT_OF_UNIT = {"GB/s": "bandwidth", "TFLOP/s": "compute", "tokens/s": "throughput"}


def _limits(b, rule) -> dict:
    return {"median": b.median, "scaled_mad": b.scaled_mad, "n": b.n_reference,
            "max_below_median": rule.max_below_median, "mad_k": rule.mad_k}


@check("node_record")
def node_record(thresholds, *, node: str, path: str | None, problem: str | None) -> Verdict:
    """The node's record is there and complete. `problem`: missing, cut short, interrupted, unreadable."""
    what = "validation record"
    if problem:
        return Verdict("", what, node, FAIL, measured=path, details={"problems": [problem]})
    return Verdict("", what, node, PASS, measured=path, note=f"complete record {path}")


@check("network_record")
def network_record(thresholds, *, directory: str, found: int) -> Verdict:
    """A multi-node run was expected (`fleet report --expect-network`): `found` records of one in `directory`."""
    what = "multi-node record"
    if not found:
        return Verdict("", what, "network", FAIL,
                       hint="the multi-node step wrote none (it did not start, its rendezvous failed, or rank 0 died "
                            "before its first line); see that step's log (multinode-<node>.log under Slurm), fix it "
                            "and run the step again",
                       details={"problems": [f"no multi-node record in {directory}"]})
    return Verdict("", what, "network", PASS, measured=found, note=f"{found} multi-node record(s) in {directory}")


def _peer_verdict(what: str, where: str, value: float, unit: str, b, rule, compared_with: str, stats: dict,
                  hint: str = "", **details) -> Verdict:
    """A fleet figure against the others' statistics, as structure: the renderer writes its words."""
    fmt = FORMAT_OF_UNIT.get(unit, "number")
    slowest = stats.get("slowest") or []
    note = ("slowest peers: " + ", ".join(f"{n} {render.figure(v, unit, fmt)}" for n, v in slowest)) \
        if b.named and slowest else ""
    return Verdict("", what, where, FAIL if b.named else PASS, measured=value, unit=unit, fmt=fmt, bound="peers",
                   limit=_limits(b, rule), source=rule.source, yaml_path=rule.yaml_path, rule="fleet", note=note,
                   hint=hint, details={"below": b.below, "compared_with": compared_with, **details})


def fleet_statistics(ref: Reference, slowest: list, nodes: int | None = None) -> dict:
    """What a fleet verdict keeps of the others' values (its `fleet` input): the statistics the rule
    reads and the three slowest, to name them. Not every peer's value: with one verdict per node and
    figure that would grow with the square of the fleet."""
    out = {"median": ref.median, "scaled_mad": ref.scaled_mad, "n": ref.n,
           "slowest": [[who, value] for who, value in slowest[:3]]}
    if nodes is not None:
        out["nodes"] = nodes
    return out


def _reference(fleet: dict | None, peers: dict | None) -> dict:
    """The `fleet` statistics, from the input itself or, in a record written before it existed, from
    the `peers` ({who: value}) it kept instead."""
    if fleet is None and peers is None:
        raise ValueError("a fleet verdict needs `fleet` (the others' median, scaled MAD and n) or `peers`")
    if fleet is None:
        slowest = sorted(peers.items(), key=lambda kv: kv[1])
        return fleet_statistics(reference_of(list(peers.values())), slowest)
    for key in ("median", "scaled_mad", "n"):
        if not isinstance(fleet.get(key), (int, float)) or isinstance(fleet.get(key), bool):
            raise ValueError(f"the fleet statistics have no number {key!r}")
    return fleet


def _judge(value: float, stats: dict, rule) -> Below:
    ref = Reference(float(stats["median"]), float(stats["scaled_mad"]), int(stats["n"]))
    return below_reference(value, ref, rule.max_below_median, rule.mad_k)




@check("fleet_outlier", limits=(FLEET,))
def fleet_outlier(thresholds, *, node: str, figure: str, kind: str, value: float, unit: str, simulated: bool,
                  fleet: dict | None = None, peers: dict | None = None) -> Verdict:
    """`value` (this node's `figure`) against the other nodes' values, with the fleet rule for `kind`
    (busbw or throughput). `fleet`: their statistics ({"median", "scaled_mad", "n", "slowest": [[node,
    value], ...]}, this node not included: fleet_statistics); a record written before it existed
    has `peers` ({node: value}) instead, from which they are computed."""
    if kind not in KINDS:
        raise ValueError(f"unknown fleet figure kind {kind!r}; known: {', '.join(KINDS)}")
    limits = thresholds.fleet(simulated)
    rule = getattr(limits, kind)
    stats = _reference(fleet, peers)
    what = f"{figure} against the fleet"
    if stats["n"] + 1 < limits.min_nodes or stats["n"] < 1:
        return skip(what, node, f"{stats['n'] + 1} node(s) have this figure; the fleet median needs "
                                f"{limits.min_nodes} (fleet.min_nodes)", details={"figure": figure})
    b = _judge(value, stats, rule)
    return _peer_verdict(what, node, value, unit, b, rule, f"{b.n_reference} other node(s)", stats,
                         figure=figure, kind=kind)


@check("fleet_gpu_outlier", limits=(FLEET,))
def fleet_gpu_outlier(thresholds, *, node: str, gpu: int, bus_id: str | None, gpu_model: str, figure: str,
                      value: float, unit: str, simulated: bool, fleet: dict | None = None,
                      peers: dict | None = None) -> Verdict:
    """One GPU's health figure (`figure`: its label, `value` in `unit`) against every other GPU of
    `gpu_model` in the fleet (its own node's other GPUs included), with the fleet rule for GPUs;
    judged when fleet.min_nodes nodes have the figure. `fleet`: the other GPUs' statistics
    (fleet_statistics, with "nodes": how many nodes have the figure, this one included); a record
    written before it existed has `peers` ({"node/GPUk": value}) instead."""
    limits = thresholds.fleet(simulated)
    rule = limits.gpus
    where = f"{node}/GPU{gpu}"
    what = f"{figure} against the fleet's {gpu_model} GPUs"
    if fleet is None and peers is not None:
        nodes = len({key.rsplit("/", 1)[0] for key in peers} | {node})
    else:
        nodes = (fleet or {}).get("nodes")
        if not isinstance(nodes, int) or isinstance(nodes, bool):
            raise ValueError("the fleet statistics of a GPU figure have no number 'nodes'")
    stats = _reference(fleet, peers)
    details = {"figure": figure, "gpu_model": gpu_model}
    if nodes < limits.min_nodes:
        return skip(what, where, f"{nodes} node(s) have this figure for {gpu_model}; comparing GPUs across nodes "
                                 f"needs {limits.min_nodes} (fleet.min_nodes); the node's own peer rule judged it",
                    details=details)
    b = _judge(value, stats, rule)
    v = _peer_verdict(what, where, value, unit, b, rule, f"{b.n_reference} other {gpu_model} GPUs (on {nodes} nodes)",
                      stats, hint="Below the fleet's GPUs of its model: reseat or replace it; `nvidia-smi -q -d CLOCK,"
                                  "PERFORMANCE,POWER` shows whether it is held back", nodes=nodes, **details)
    return v.amended(place=f"node {node} GPU{gpu}" + (f" ({bus_id})" if bus_id else ""))


# ---- the pair schedule ---------------------------------------------------------------------------


def _by_pair(pairs: list) -> dict[str, dict]:
    return {pair_key(p["a"], p["b"]): p for p in pairs}


def _nodes(pairs: list) -> list[str]:
    return sorted({p["a"] for p in pairs} | {p["b"] for p in pairs})


def _node_judgement(node: str, pairs: list, rule, min_reference: int):
    """(None or the Below of the node's fastest pair against the pairs without it, its pairs, the rest).
    The fastest: a slow node is slow with every partner, while two slow links that meet at a healthy
    node leave it fast with its other partners."""
    mine = [p for p in pairs if node in (p["a"], p["b"])]
    rest = [p["busbw_bytes_per_s"] for p in pairs if node not in (p["a"], p["b"])]
    if len(mine) < 2 or len(rest) < min_reference:
        return None, mine, rest
    fastest = max(p["busbw_bytes_per_s"] for p in mine)
    return below_median(fastest, rest, rule.max_below_median, rule.mad_k), mine, rest


def slow_nodes(pairs: list, thresholds, simulated: bool) -> list[str]:
    limits = thresholds.fleet(simulated)
    out = []
    for node in _nodes(pairs):
        b, _, _ = _node_judgement(node, pairs, limits.pairs, limits.min_nodes)
        if b is not None and b.named:
            out.append(node)
    return out


def format_bw(bytes_per_s: float) -> str:
    """Three significant digits: simulated pairs run at a few hundredths of a GB/s."""
    return f"{bytes_per_s / GB:.3g} GB/s"


def _pair_text(p: dict) -> str:
    return f"{p['a']}-{p['b']} {format_bw(p['busbw_bytes_per_s'])}"


@check("pair_node", limits=(FLEET,))
def pair_node(thresholds, *, node: str, pairs: list, simulated: bool) -> Verdict:
    """A node is slow when even its fastest pair (over every partner of both rounds) is below the pairs
    it is not in. `pairs`: [{"a", "b", "busbw_bytes_per_s"}] of the whole schedule."""
    limits = thresholds.fleet(simulated)
    rule = limits.pairs
    what = "node pairs of the ring schedule"
    b, mine, rest = _node_judgement(node, pairs, rule, limits.min_nodes)
    if b is None:
        return skip(what, node, f"{len(mine)} pair(s) with {node} and {len(rest)} without it: telling a slow node "
                                f"from a slow link needs 2 with and {limits.min_nodes} without (4 or more nodes)")
    listed = ", ".join(_pair_text(p) for p in mine)
    return Verdict("", what, node, FAIL if b.named else PASS, measured=b.value / GB, unit="GB/s", fmt="bandwidth",
                   bound="peers", limit={**_limits(b, rule), "median": b.median / GB, "scaled_mad": b.scaled_mad / GB},
                   source=rule.source, yaml_path=rule.yaml_path, rule="fleet", note=f"the fastest of its pairs ({listed})",
                   hint=f"node {node} is slow with every partner",
                   details={"below": b.below, "compared_with": f"{b.n_reference} pairs without it"})


@check("pair_link", limits=(FLEET,))
def pair_link(thresholds, *, a: str, b: str, pairs: list, simulated: bool) -> Verdict:
    """The link between nodes a and b against the pairs that touch no slow node. A slow pair with a
    slow node in it is that node's (pair_node names it); one between two healthy nodes is the link."""
    limits = thresholds.fleet(simulated)
    rule = limits.pairs
    where = f"{a}~{b}"
    what = "link between two nodes"
    by_pair = _by_pair(pairs)
    me = by_pair.get(pair_key(a, b))
    if me is None:
        return skip(what, where, "this pair was not measured")
    slow = slow_nodes(pairs, thresholds, simulated)
    if a in slow or b in slow:
        return skip(what, where, f"node {a if a in slow else b} is slow with every partner: the pair's speed is the node's")
    reference = [p["busbw_bytes_per_s"] for k, p in by_pair.items()
                 if k != pair_key(a, b) and p["a"] not in slow and p["b"] not in slow]
    if len(reference) < limits.min_nodes:
        return skip(what, where, f"{len(reference)} other pair(s) to compare with; the median needs {limits.min_nodes}")
    bl = below_median(me["busbw_bytes_per_s"], reference, rule.max_below_median, rule.mad_k)
    return Verdict("", what, where, FAIL if bl.named else PASS, measured=bl.value / GB, unit="GB/s", fmt="bandwidth",
                   bound="peers", limit={**_limits(bl, rule), "median": bl.median / GB, "scaled_mad": bl.scaled_mad / GB},
                   source=rule.source, yaml_path=rule.yaml_path, rule="fleet",
                   hint=f"the link is slow while {a} and {b} are fine with their other partners (cable, switch port "
                        "or route between them?)",
                   details={"below": bl.below, "compared_with": f"{bl.n_reference} other pairs"})
