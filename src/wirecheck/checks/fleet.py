"""Fleet checks: a node's record is there and complete, a node's key figure against its peers', and
the pair schedule's node-or-link attribution.

A node cleared by its own floors can still be slower than its peers: the fleet rule
(wirecheck.core.peer_stats) names it. Inputs are plain data (figures, the fleet's statistics, pair
bandwidths), so `wirecheck fleet report --json` keeps them and the same functions judge them again.
"""

from __future__ import annotations

from dataclasses import dataclass

from wirecheck.checks import check
from wirecheck.checks.words import Words
from wirecheck.core.pair_schedule import pair_key
from wirecheck.core import problems, render
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

NODE_RECORD = Words(
    what="validation record",
    means="a node's record is missing, cut short or interrupted: the node was not validated",
    todo="look at the node's job log; run `wirecheck validate` on it again",
    say={"complete": "complete record {path}"})
NETWORK_RECORD = Words(
    what="multi-node record",
    means="the multi-node step wrote no record: the fleet's network was not validated",
    todo="look at the multi-node job's log (rendezvous, a node without a GPU)",
    say={"none": "the multi-node step wrote none (it did not start, its rendezvous failed, or rank 0 died before its "
                 "first line); see that step's log (multinode-<node>.log under Slurm), fix it and run the step again",
         "missing": "no multi-node record in {directory}",
         "found": "{found} multi-node record(s) in {directory}"})
_SLOWEST = "slowest peers: {slowest}"
FLEET_OUTLIER = Words(
    what="{figure} against the fleet",
    means="a node is clearly slower than its peers, even if it clears its own floors",
    todo="run `wirecheck validate -k <placement> -v` on that node and compare its link and clocks with a peer's",
    say={"slowest": _SLOWEST, "others": "{n} other node(s)",
         "too_few": "{nodes} node(s) have this figure; the fleet median needs {min_nodes} (fleet.min_nodes)"})
FLEET_GPU_OUTLIER = Words(
    what="{figure} against the fleet's {gpu_model} GPUs",
    means="a GPU is clearly slower than the fleet's GPUs of its model, even if it clears its own floor and its node's "
          "peers (every GPU of its node may be slow alike: power, cooling or firmware of that node)",
    todo="compare `nvidia-smi -q -d CLOCK,PERFORMANCE,POWER` on that node with a peer node's (clocks, power limit, "
         "firmware); reseat or replace the GPU; run `wirecheck validate -m health -v` on it",
    say={"slowest": _SLOWEST, "others": "{n} other {gpu_model} GPUs (on {nodes} nodes)",
         "place": "node {node} GPU{gpu}", "bus": " ({bus_id})",
         "too_few": "{nodes} node(s) have this figure for {gpu_model}; comparing GPUs across nodes needs {min_nodes} "
                    "(fleet.min_nodes); the node's own peer rule judged it"})
PAIR_NODE = Words(
    what="node pairs of the ring schedule",
    means="a node is slow with every partner: the node (its NICs, PCIe or GPUs) is the problem",
    todo="`wirecheck fleet inventory` and `ibstat` on that node",
    say={"too_few": "{mine} pair(s) with {node} and {rest} without it: telling a slow node from a slow link needs 2 "
                    "with and {min_nodes} without (4 or more nodes)",
         "fastest": "the fastest of its pairs ({listed})",
         "slow": "node {node} is slow with every partner",
         "others": "{n} pairs without it"})
PAIR_LINK = Words(
    what="link between two nodes",
    means="one node pair is slow while both nodes are fine with others: the link or switch path between them",
    todo="check the cables and switch ports between the two nodes",
    say={"not_measured": "this pair was not measured",
         "node_slow": "node {node} is slow with every partner: the pair's speed is the node's",
         "too_few": "{n} other pair(s) to compare with; the median needs {min_nodes}",
         "slow": "the link is slow while {a} and {b} are fine with their other partners (cable, switch port or route "
                 "between them?)",
         "others": "{n} other pairs"})


def _limits(b, rule) -> dict:
    return {"median": b.median, "scaled_mad": b.scaled_mad, "n": b.n_reference,
            "max_below_median": rule.max_below_median, "mad_k": rule.mad_k}


@check("node_record", words=NODE_RECORD)
def node_record(thresholds, *, node: str, path: str | None, problem: str | None,
                problem_kind: str | None = None) -> Verdict:
    """The node's record is there and complete. `problem`: what is wrong with it, in words; `problem_kind`:
    the same as a kind of core.problems (missing, cut_short, stopped, unreadable), which the fleet counts by."""
    what = NODE_RECORD.judged()
    if problem:
        kind = problem_kind or (problems.MISSING if path is None else problems.UNREADABLE)
        return Verdict("", what, node, FAIL, measured=path, details={"problems": [problem]}, problem=kind)
    return Verdict("", what, node, PASS, measured=path, note=NODE_RECORD.said("complete", path=path))


@check("network_record", words=NETWORK_RECORD)
def network_record(thresholds, *, directory: str, found: int) -> Verdict:
    """A multi-node run was expected (`fleet report --expect-network`): `found` records of one in `directory`."""
    what = NETWORK_RECORD.judged()
    if not found:
        return Verdict("", what, "network", FAIL, hint=NETWORK_RECORD.said("none"), problem=problems.MISSING,
                       details={"problems": [NETWORK_RECORD.said("missing", directory=directory)]})
    return Verdict("", what, "network", PASS, measured=found,
                   note=NETWORK_RECORD.said("found", found=found, directory=directory))


def _peer_verdict(words: Words, what: str, where: str, value: float, unit: str, b, rule, compared_with: str,
                  stats: dict, hint: str = "", **details) -> Verdict:
    """A fleet figure against the others' statistics, as structure: the renderer writes its words."""
    fmt = FORMAT_OF_UNIT.get(unit, "number")
    slowest = stats.get("slowest") or []
    note = words.said("slowest", slowest=", ".join(f"{n} {render.figure(v, unit, fmt)}" for n, v in slowest)) \
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




@check("fleet_outlier", words=FLEET_OUTLIER, limits=(FLEET,))
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
    what = FLEET_OUTLIER.judged(figure=figure)
    if stats["n"] + 1 < limits.min_nodes or stats["n"] < 1:
        return skip(what, node, FLEET_OUTLIER.said("too_few", nodes=stats["n"] + 1, min_nodes=limits.min_nodes),
                    details={"figure": figure})
    b = _judge(value, stats, rule)
    return _peer_verdict(FLEET_OUTLIER, what, node, value, unit, b, rule, FLEET_OUTLIER.said("others", n=b.n_reference),
                         stats, figure=figure, kind=kind)


@check("fleet_gpu_outlier", words=FLEET_GPU_OUTLIER, limits=(FLEET,))
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
    what = FLEET_GPU_OUTLIER.judged(figure=figure, gpu_model=gpu_model)
    if fleet is None and peers is not None:
        nodes = len({key.rsplit("/", 1)[0] for key in peers} | {node})
    else:
        nodes = (fleet or {}).get("nodes")
        if not isinstance(nodes, int) or isinstance(nodes, bool):
            raise ValueError("the fleet statistics of a GPU figure have no number 'nodes'")
    stats = _reference(fleet, peers)
    details = {"figure": figure, "gpu_model": gpu_model}
    if nodes < limits.min_nodes:
        return skip(what, where, FLEET_GPU_OUTLIER.said("too_few", nodes=nodes, gpu_model=gpu_model,
                                                        min_nodes=limits.min_nodes), details=details)
    b = _judge(value, stats, rule)
    v = _peer_verdict(FLEET_GPU_OUTLIER, what, where, value, unit, b, rule,
                      FLEET_GPU_OUTLIER.said("others", n=b.n_reference, gpu_model=gpu_model, nodes=nodes), stats,
                      nodes=nodes, **details)
    return v.amended(place=FLEET_GPU_OUTLIER.said("place", node=node, gpu=gpu)
                     + (FLEET_GPU_OUTLIER.said("bus", bus_id=bus_id) if bus_id else ""))


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


@check("pair_node", words=PAIR_NODE, limits=(FLEET,))
def pair_node(thresholds, *, node: str, pairs: list, simulated: bool) -> Verdict:
    """A node is slow when even its fastest pair (over every partner of both rounds) is below the pairs
    it is not in. `pairs`: [{"a", "b", "busbw_bytes_per_s"}] of the whole schedule."""
    limits = thresholds.fleet(simulated)
    rule = limits.pairs
    what = PAIR_NODE.judged()
    b, mine, rest = _node_judgement(node, pairs, rule, limits.min_nodes)
    if b is None:
        return skip(what, node, PAIR_NODE.said("too_few", mine=len(mine), node=node, rest=len(rest),
                                               min_nodes=limits.min_nodes))
    listed = ", ".join(_pair_text(p) for p in mine)
    return Verdict("", what, node, FAIL if b.named else PASS, measured=b.value / GB, unit="GB/s", fmt="bandwidth",
                   bound="peers", limit={**_limits(b, rule), "median": b.median / GB, "scaled_mad": b.scaled_mad / GB},
                   source=rule.source, yaml_path=rule.yaml_path, rule="fleet", note=PAIR_NODE.said("fastest", listed=listed),
                   hint=PAIR_NODE.said("slow", node=node),
                   details={"below": b.below, "compared_with": PAIR_NODE.said("others", n=b.n_reference)})


@check("pair_link", words=PAIR_LINK, limits=(FLEET,))
def pair_link(thresholds, *, a: str, b: str, pairs: list, simulated: bool) -> Verdict:
    """The link between nodes a and b against the pairs that touch no slow node. A slow pair with a
    slow node in it is that node's (pair_node names it); one between two healthy nodes is the link."""
    limits = thresholds.fleet(simulated)
    rule = limits.pairs
    where = f"{a}~{b}"
    what = PAIR_LINK.judged()
    by_pair = _by_pair(pairs)
    me = by_pair.get(pair_key(a, b))
    if me is None:
        return skip(what, where, PAIR_LINK.said("not_measured"))
    slow = slow_nodes(pairs, thresholds, simulated)
    if a in slow or b in slow:
        return skip(what, where, PAIR_LINK.said("node_slow", node=a if a in slow else b))
    reference = [p["busbw_bytes_per_s"] for k, p in by_pair.items()
                 if k != pair_key(a, b) and p["a"] not in slow and p["b"] not in slow]
    if len(reference) < limits.min_nodes:
        return skip(what, where, PAIR_LINK.said("too_few", n=len(reference), min_nodes=limits.min_nodes))
    bl = below_median(me["busbw_bytes_per_s"], reference, rule.max_below_median, rule.mad_k)
    return Verdict("", what, where, FAIL if bl.named else PASS, measured=bl.value / GB, unit="GB/s", fmt="bandwidth",
                   bound="peers", limit={**_limits(bl, rule), "median": bl.median / GB, "scaled_mad": bl.scaled_mad / GB},
                   source=rule.source, yaml_path=rule.yaml_path, rule="fleet",
                   hint=PAIR_LINK.said("slow", a=a, b=b),
                   details={"below": bl.below, "compared_with": PAIR_LINK.said("others", n=bl.n_reference)})
