"""The fleet rule (a node against its peers' median) and the pair schedule (ring, then shifted ring),
on figures shaped like the 2x H200 SXM reference readings: each rule names what it must and nobody else.
"""

from __future__ import annotations

import pytest

from e2e import PROJECT
from wirecheck import checks
from wirecheck.core.pair_schedule import all_pairs, pair_key, pair_rounds
from wirecheck.core.peer_stats import below_median
from wirecheck.thresholds.file import load_thresholds

GB = 1e9


@pytest.fixture(scope="module")
def shipped():
    return load_thresholds(PROJECT / "thresholds.yaml")


# ---- the rule --------------------------------------------------------------------------------------


def test_both_conditions_are_needed():
    tight = [100.0, 100.5, 99.5, 100.2]
    assert below_median(90, tight, 0.05, 3).named  # 10 % below, far past the noise
    assert not below_median(97, tight, 0.05, 3).named  # past the noise, but only 3 %
    noisy = [100.0, 80.0, 120.0, 90.0, 110.0]
    assert not below_median(90, noisy, 0.05, 3).named  # 10 % below, inside the noise
    b = below_median(130, tight, 0.05, 3)
    assert not b.named and b.below < 0 and "above the median" in b.describe(str)


def _outlier(th, value, peers, kind="busbw", unit="GB/s", simulated=False):
    return checks.fleet.fleet_outlier(th, node="n9", figure="reduce_scatter busbw on nvswitch-2gpu-0.1 at 1 GiB",
                                      kind=kind, value=value, peers=peers, unit=unit, simulated=simulated)


def test_a_node_ten_percent_below_its_peers_is_named_above_its_floor(shipped):
    """275 GB/s reduce_scatter (the 2x H200 SXM reading) on 15 peers; one node at 10 % below still clears
    its own floor (247 GB/s), and the fleet rule names it."""
    peers = {f"n{k}": 275.1 + d for k, d in enumerate((-1.2, 0.4, 0.9, -0.3, 1.5, -0.8, 0.2, 0.0, -1.9, 1.1, 0.6,
                                                         -0.5, 0.3, -0.1, 0.8))}
    slow = 0.9 * 275.1
    floor = checks.collectives.busbw(shipped, op="reduce_scatter", placement="nvswitch-2gpu-0.1",
                                     placement_class="nvswitch", n_gpus=2, simulated=False,
                                     busbw_bytes_per_s=slow * GB, size_bytes=2**30, link_ceiling_bytes_per_s=None)
    assert floor.outcome == "pass", floor.message
    v = _outlier(shipped, slow, peers)
    assert v.outcome == "fail" and v.where == "n9"
    assert "10.1 % below the median 275.3 GB/s of 15 other node(s)" in v.message and "fleet.hardware.busbw" in v.yaml_path
    assert v.source == shipped.fleet(False).busbw.source
    healthy = _outlier(shipped, 274.0, {k: p for k, p in peers.items() if k != "n3"})
    assert healthy.outcome == "pass"


def test_throughput_has_its_own_rule(shipped):
    peers = {f"n{k}": 87000.0 + 500 * k for k in range(6)}
    # 20 % below: a busbw figure would be named, a training step's noise is not
    assert _outlier(shipped, 0.8 * 88000, peers, kind="busbw", unit="tokens/s").outcome == "fail"
    assert _outlier(shipped, 0.8 * 88000, peers, kind="throughput", unit="tokens/s").outcome == "pass"
    assert _outlier(shipped, 0.5 * 88000, peers, kind="throughput", unit="tokens/s").outcome == "fail"


def test_too_few_nodes_is_not_judged(shipped):
    v = _outlier(shipped, 1.0, {"n0": 300.0})
    assert v.outcome == "skip" and "the fleet median needs 3" in v.message


def test_records_are_judged_again_with_the_same_function(shipped):
    peers = {f"n{k}": 300.0 + k for k in range(5)}
    v = _outlier(shipped, 250.0, peers)
    again = checks.rejudge(v, shipped)
    assert again.outcome == v.outcome == "fail" and again.message == v.message


# ---- the schedule ----------------------------------------------------------------------------------


@pytest.mark.parametrize("n", [2, 3, 4, 5, 8, 13, 1000])
def test_every_node_paired_in_linear_tests(n):
    nodes = [f"node{k:04d}" for k in range(n)]
    rounds = pair_rounds(nodes)
    pairs = all_pairs(rounds)
    assert len(pairs) <= 2 * n, "O(N) pair tests, not N^2"
    assert len({pair_key(*p) for p in pairs}) == len(pairs), "no pair twice"
    for r in rounds:
        assert sorted(p for m in r.matchings for p in m) == sorted(r.pairs)
        for m in r.matchings:
            busy = [x for p in m for x in p]
            assert len(busy) == len(set(busy)), "a matching never holds a node twice"
        assert len(r.matchings) <= 3, "each round runs in a constant number of steps"
    partners = {x: {b if a == x else a for a, b in pairs if x in (a, b)} for x in nodes}
    assert all(len(p) >= min(n - 1, 4) for p in partners.values()), partners
    if n == 1000:
        assert len(pairs) == 2000


def _pairs(nodes, busbw):
    return [{"a": a, "b": b, "busbw_bytes_per_s": busbw(a, b)} for a, b in all_pairs(pair_rounds(nodes))]


def _verdicts(th, pairs, nodes):
    node_v = {n: checks.fleet.pair_node(th, node=n, pairs=pairs, simulated=False) for n in nodes}
    link_v = {pair_key(p["a"], p["b"]): checks.fleet.pair_link(th, a=p["a"], b=p["b"], pairs=pairs, simulated=False)
              for p in pairs}
    return ({n for n, v in node_v.items() if v.outcome == "fail"},
            {k for k, v in link_v.items() if v.outcome == "fail"}, node_v, link_v)


NODES = [f"n{k}" for k in range(8)]


def _fabric(slow_nodes=(), slow_links=()):
    def busbw(a, b):
        value = 48e9 + 0.2e9 * ((hash(a + b) % 5) - 2)  # ~48 GB/s per 400 Gb/s NIC, +-1 %
        if a in slow_nodes or b in slow_nodes:
            value *= 0.85
        if pair_key(a, b) in slow_links:
            value *= 0.7
        return value
    return busbw


def test_a_healthy_fabric_names_nobody(shipped):
    nodes, links, node_v, _ = _verdicts(shipped, _pairs(NODES, _fabric()), NODES)
    assert nodes == set() and links == set()
    assert all(v.outcome == "pass" for v in node_v.values())


def test_a_slow_node_is_named_not_its_links(shipped):
    nodes, links, node_v, link_v = _verdicts(shipped, _pairs(NODES, _fabric(slow_nodes={"n3"})), NODES)
    assert nodes == {"n3"} and links == set()
    assert "n3 is slow with every partner" in node_v["n3"].message
    assert link_v[pair_key("n2", "n3")].outcome == "skip" and "n3 is slow" in link_v[pair_key("n2", "n3")].message


def test_a_slow_link_is_named_not_its_nodes(shipped):
    nodes, links, _, link_v = _verdicts(shipped, _pairs(NODES, _fabric(slow_links={pair_key("n2", "n3")})), NODES)
    assert nodes == set() and links == {pair_key("n2", "n3")}
    assert "n2 and n3 are fine with their other partners" in link_v[pair_key("n2", "n3")].message


def test_the_second_round_tells_a_node_from_two_links(shipped):
    """Links n2-n3 and n3-n4 slow: on the ring alone n3 looks like a slow node (both its ring pairs slow);
    its shift-2 partners (n1, n5) are fine, so the links are named and n3 is not."""
    two_links = _fabric(slow_links={pair_key("n2", "n3"), pair_key("n3", "n4")})
    ring_only = [p for p in _pairs(NODES, two_links) if (NODES.index(p["b"]) - NODES.index(p["a"])) % 8 == 1]
    assert {p["a"] for p in ring_only if p["busbw_bytes_per_s"] < 40e9} == {"n2", "n3"}
    nodes, links, _, _ = _verdicts(shipped, _pairs(NODES, two_links), NODES)
    assert nodes == set() and links == {pair_key("n2", "n3"), pair_key("n3", "n4")}


def test_three_nodes_cannot_tell(shipped):
    three = ["a", "b", "c"]
    v = checks.fleet.pair_node(shipped, node="c", pairs=_pairs(three, _fabric(slow_nodes={"c"})), simulated=False)
    assert v.outcome == "skip" and "4 or more nodes" in v.message
