"""Node pairs in O(N) tests per round: a ring, then the ring shifted by two.

Measuring all N(N-1)/2 pairs does not scale (500,000 pair tests for 1,000 nodes). Large-cluster
checks pair each node with its ring neighbour instead: N pairs, every node in two of them. One ring
cannot tell a slow node (both of its pairs slow) from two slow links that happen to meet at it;
a second ring with another stride gives every node new partners, so a slow node is slow with all
of them while a slow link stays alone. Each round is run as a few matchings (sets of disjoint pairs)
that run at the same time, so the wall time does not grow with N.

Pure logic, no torch: wirecheck.fleet.multinode runs the schedule, wirecheck.checks.fleet judges it.
"""

from __future__ import annotations

from dataclasses import dataclass

SHIFTS = (1, 2)  # round 1: the ring; round 2: every node with the node two along


@dataclass(frozen=True)
class Round:
    shift: int
    pairs: tuple[tuple[str, str], ...]  # each unordered pair once, first seen in this round
    matchings: tuple[tuple[tuple[str, str], ...], ...]  # groups of disjoint pairs, run at the same time


def pair_key(a: str, b: str) -> str:
    return "~".join(sorted((a, b)))


def _matchings(pairs: list[tuple[str, str]]) -> list[tuple[tuple[str, str], ...]]:
    """Greedy edge colouring: each pair into the first matching where neither node is busy.
    A ring needs 2 matchings (3 for an odd N), a union of rings a few more: O(1) in N."""
    out: list[list[tuple[str, str]]] = []
    busy: list[set[str]] = []
    for a, b in pairs:
        for k, used in enumerate(busy):
            if a not in used and b not in used:
                out[k].append((a, b))
                used.update((a, b))
                break
        else:
            out.append([(a, b)])
            busy.append({a, b})
    return [tuple(m) for m in out]


def pair_rounds(nodes: list[str]) -> list[Round]:
    """The schedule over `nodes` in ring order (the caller decides the order; sorted host names keep it
    stable from run to run). Pairs already measured in an earlier round are not measured again."""
    if len(set(nodes)) != len(nodes):
        raise ValueError(f"node names must be unique, got {nodes}")
    n = len(nodes)
    seen: set[str] = set()
    rounds = []
    for shift in SHIFTS:
        pairs = []
        for i in range(n):
            a, b = nodes[i], nodes[(i + shift) % n]
            if a == b or pair_key(a, b) in seen:
                continue
            seen.add(pair_key(a, b))
            pairs.append((a, b))
        if pairs:
            rounds.append(Round(shift, tuple(pairs), tuple(_matchings(pairs))))
    return rounds


def listed_rounds(pairs: list[tuple[str, str]]) -> list[Round]:
    """The given pairs instead of the ring schedule (`wirecheck fleet diagnose` picks them: each suspect with
    known-good partners), as one round (shift 0) in matchings of disjoint pairs; a pair listed twice is
    measured once."""
    seen: set[str] = set()
    unique = []
    for a, b in pairs:
        if a == b:
            raise ValueError(f"pair {a}~{b}: a node cannot be paired with itself")
        if pair_key(a, b) not in seen:
            seen.add(pair_key(a, b))
            unique.append((a, b))
    return [Round(0, tuple(unique), tuple(_matchings(unique)))] if unique else []


def all_pairs(rounds: list[Round]) -> list[tuple[str, str]]:
    return [p for r in rounds for p in r.pairs]
