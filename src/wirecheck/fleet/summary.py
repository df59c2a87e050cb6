"""A fleet in a few lines, for the terminal and the page: how many nodes are in each state, the nodes
furthest below the fleet, and each figure's distribution over the fleet. Read from the verdicts'
structure (their `details`, `measured`, `limit`), never from their wording.

At 10,000 nodes the table of every node is a file to search (`--json`, the page's collapsed table),
not something to read first: the report leads with the failures, then this.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from wirecheck.fleet.judging import FleetResult
from wirecheck.core.verdict import FAIL, SKIP

# The order a person reads the states in: what failed first, PASS last.
STATES = ("MISSING", "CUT", "DAMAGED", "BROKEN", "DUPLICATE", "PARTIAL", "own checks", "below peers", "GPUs below fleet", "slow in pairs", "PASS")


def state_counts(result: FleetResult) -> dict[str, int]:
    """{state: nodes}, in STATES order, states without a node left out; nodes that never wrote a
    record under --expect N count as MISSING."""
    counts = Counter(n.state for n in result.nodes)
    counts["MISSING"] += result.missing_unnamed
    return {s: counts[s] for s in STATES if counts[s]}


def states_line(result: FleetResult) -> str:
    total = len(result.nodes) + result.missing_unnamed
    return f"{total} node(s): " + ", ".join(f"{count} {state}" for state, count in state_counts(result).items())


@dataclass(frozen=True)
class Worst:
    node: str
    below: float  # fraction of the fleet's median its figure is under it
    figure: str
    named: bool


def worst_nodes(result: FleetResult, k: int = 10) -> list[Worst]:
    """The k nodes (or GPUs) whose figure is furthest below the fleet's median, named ones or not."""
    out = []
    for n in result.nodes:
        for v in [*n.outliers, *n.gpus]:
            below = v.details.get("below")
            if v.outcome != SKIP and isinstance(below, (int, float)) and below > 0:
                out.append(Worst(v.where or n.node, below, v.details.get("figure") or v.what, v.outcome == FAIL))
    out.sort(key=lambda w: -w.below)
    seen, worst = set(), []
    for w in out:  # a node once, at its worst figure
        if w.node not in seen:
            seen.add(w.node)
            worst.append(w)
        if len(worst) == k:
            break
    return worst


@dataclass
class Distribution:
    figure: str  # its label ("all_reduce busbw on nvswitch-2gpu-0.1 at 1 GiB", "HBM copy ... (NVIDIA H200)")
    unit: str
    values: list[float] = field(default_factory=list)  # every node's (or GPU's), sorted
    named: list[tuple[str, float]] = field(default_factory=list)  # (node or node/GPUk, value) of the named
    rule: float | None = None  # the rule's fraction below the median

    @property
    def n(self) -> int:
        return len(self.values)

    def quantile(self, q: float) -> float:
        return self.values[min(len(self.values) - 1, max(0, round(q * (len(self.values) - 1))))]

    @property
    def median(self) -> float:
        return self.quantile(0.5)


def distributions(result: FleetResult) -> list[Distribution]:
    """Every judged figure of the fleet (node figures, then GPU figures by model), its values sorted."""
    by: dict[str, Distribution] = {}
    for n in result.nodes:
        for v in [*n.outliers, *n.gpus]:
            if v.outcome == SKIP or not isinstance(v.measured, (int, float)):
                continue
            label = v.details.get("figure") or v.what
            if v.details.get("gpu_model"):
                label = f"{label} ({v.details['gpu_model']} GPUs)"
            d = by.get(label)
            if d is None:
                d = by[label] = Distribution(label, v.unit or "", rule=(v.limit or {}).get("max_below_median"))
            d.values.append(v.measured)
            if v.outcome == FAIL:
                d.named.append((v.where or n.node, v.measured))
    for d in by.values():
        d.values.sort()
        d.named.sort(key=lambda wv: wv[1])
    return list(by.values())


def number(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 1e4 else f"{value:.4g}"


def distribution_line(d: Distribution) -> str:
    named = (f"; {len(d.named)} named: " + ", ".join(f"{who} {number(v)}" for who, v in d.named[:5])
             + (f" (+{len(d.named) - 5} more)" if len(d.named) > 5 else "")) if d.named else ""
    return (f"{d.figure}: {d.n} values, median {number(d.median)} {d.unit}, 5th-95th percentile "
            f"{number(d.quantile(0.05))}-{number(d.quantile(0.95))}, lowest {number(d.values[0])}{named}")


def shortened(names: list[str], at_most: int = 30) -> str:
    """A list of names for one line: the first `at_most`, then how many more."""
    if len(names) <= at_most:
        return ", ".join(names)
    return ", ".join(names[:at_most]) + f" (+{len(names) - at_most} more)"
