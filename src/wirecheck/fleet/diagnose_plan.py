"""Which nodes `wirecheck fleet diagnose` suspects, which it trusts, and which pairs it measures.

From a fleet report's data (`wirecheck fleet report --json`, or the same made from a records directory):
the suspects are the nodes the pair schedule named (slow with every partner), both ends of a slow link,
nodes below the fleet's NIC line rate, and any other node that failed with a record to show for it; the
known-good nodes passed everything (their own checks, the fleet rule, the pair schedule) and are no end of
a slow link. Each suspect is paired with up to three distinct known-good partners (each partner used as
little as possible, one on another leaf switch first where the leaves are known), the suspects with each
other once, and a few pairs of two known-good nodes measured in the same run: their median is what a
pair should reach now, on this fabric.

Pure data in, data out: nothing runs here (wirecheck.fleet.diagnose runs the pairs, diagnosis judges them).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path

from wirecheck.core import render as words

PARTNERS = 3  # good partners per suspect: 3 of 3 slow is the node; fewer than 2 cannot tell node from path
MIN_PARTNERS = 2
CONTROLS = 3  # pairs of two known-good nodes: the reference measured in the same run
MESH_UP_TO = 6  # suspects paired each with each up to this many (15 pairs); beyond, a ring and the slow links
LINE_RATE = "NIC line rate"  # the fleet figure's label (wirecheck.fleet.figures)


class PlanError(ValueError):
    """The nodes given cannot make a plan; the message names the option and the fix."""


@dataclass(frozen=True)
class Suspect:
    node: str
    why: tuple[str, ...]  # what named it, one phrase each
    links: tuple[str, ...] = ()  # partners it was a slow link with ("a~b" keys' other end)


@dataclass
class Plan:
    suspects: list[Suspect]
    good: list[str]  # every known-good node
    partners: dict[str, list[str]] = field(default_factory=dict)  # suspect -> its good partners
    controls: list[tuple[str, str]] = field(default_factory=list)  # good ~ good: the reference
    between: list[tuple[str, str]] = field(default_factory=list)  # suspect ~ suspect
    left_out: list[tuple[str, str]] = field(default_factory=list)  # (node, why): neither suspect nor good
    leaves: dict[str, str] = field(default_factory=dict)  # node -> leaf switch, where known
    good_given: bool = False  # --good named them

    @property
    def suspect_names(self) -> list[str]:
        return [s.node for s in self.suspects]

    @property
    def pairs(self) -> list[tuple[str, str]]:
        """Every pair to measure: the reference first, then each suspect with its partners, then the suspects."""
        out = list(self.controls)
        out += [(s, g) for s in self.suspect_names for g in self.partners.get(s, [])]
        return out + list(self.between)

    @property
    def nodes(self) -> list[str]:
        return sorted({n for pair in self.pairs for n in pair})

    def shared_leaf(self, suspect: str) -> list[str]:
        leaf = self.leaves.get(suspect)
        return [g for g in self.partners.get(suspect, []) if leaf is not None and self.leaves.get(g) == leaf]

    def as_data(self) -> dict:
        return {"suspects": [{"node": s.node, "why": list(s.why), "links": list(s.links)} for s in self.suspects],
                "good": self.good, "partners": self.partners, "controls": [list(p) for p in self.controls],
                "between": [list(p) for p in self.between], "left_out": [list(x) for x in self.left_out],
                "leaves": self.leaves, "good_given": self.good_given}


def _failed(records: list) -> bool:
    return any(isinstance(v, dict) and v.get("outcome") == "fail" for v in records or [])


def classify(report: dict, listed: list[str] | None = None) -> tuple[list[Suspect], list[str], list[tuple[str, str]]]:
    """(suspects, known-good nodes, left out with why) from a fleet report's data (report.as_json).
    `listed`: only these nodes count (--nodes); one the report does not have is left out, said so."""
    links: dict[str, list[str]] = {}
    for key in (report.get("named") or {}).get("slow_links") or []:
        a, _, b = str(key).partition("~")
        links.setdefault(a, []).append(b)
        links.setdefault(b, []).append(a)
    suspects, good, left_out = [], [], []
    seen = set()
    for n in report.get("nodes") or []:
        name = n.get("node")
        if not isinstance(name, str) or (listed is not None and name not in listed):
            continue
        seen.add(name)
        why = []
        if _failed(n.get("pairs")):
            why.append("slow with every partner in the pair schedule")
        why += [f"an end of the slow link {'~'.join(sorted((name, other)))}" for other in links.get(name, [])]
        if any(v.get("details", {}).get("figure") == LINE_RATE for v in n.get("outliers") or []
               if isinstance(v, dict) and v.get("outcome") == "fail"):
            why.append("its NIC line rate is below the fleet's")
        state = n.get("state")
        if not why and not n.get("ok"):
            if state == "MISSING" or not n.get("path"):
                left_out.append((name, "no record: not started or down; bring it up and validate it first"))
                continue
            why.append(f"failed ({state})")
        if why:
            suspects.append(Suspect(name, tuple(why), tuple(sorted(links.get(name, [])))))
        else:
            good.append(name)
    for name in listed or []:
        if name not in seen:
            left_out.append((name, "not in the fleet report"))
    return suspects, sorted(good), left_out


def choose_partners(suspects: list[str], good: list[str], leaves: dict[str, str] | None = None,
                    per_suspect: int = PARTNERS) -> dict[str, list[str]]:
    """Up to `per_suspect` distinct good partners for each suspect: one on another leaf switch than the
    suspect's first (where both leaves are known), then the least used so far (so one good node does not
    carry every suspect), then by name: the same input gives the same plan."""
    leaves = leaves or {}
    uses: Counter = Counter()
    out = {}
    for s in suspects:
        def rank(g: str, s=s):
            same_leaf = leaves.get(s) is not None and leaves.get(g) == leaves.get(s)
            return (same_leaf, uses[g], g)

        chosen = sorted(good, key=rank)[:per_suspect]
        uses.update(chosen)
        out[s] = chosen
    return out


def control_pairs(partners: dict[str, list[str]], limit: int = CONTROLS) -> list[tuple[str, str]]:
    """Pairs of two known-good partners, a ring over the first `limit` of them (one pair for two)."""
    used = sorted({g for gs in partners.values() for g in gs})[:limit]
    if len(used) < 2:
        return []
    if len(used) == 2:
        return [(used[0], used[1])]
    return [(used[k], used[(k + 1) % len(used)]) for k in range(len(used))]


def suspect_pairs(suspects: list[Suspect]) -> list[tuple[str, str]]:
    """Each suspect with each other once (up to MESH_UP_TO suspects), else a ring over them plus every
    slow link the report named between two of them."""
    names = [s.node for s in suspects]
    if len(names) <= MESH_UP_TO:
        return list(combinations(names, 2))
    keys, out = set(), []
    ring = [(names[k], names[(k + 1) % len(names)]) for k in range(len(names))]
    links = [(s.node, o) for s in suspects for o in s.links if o in names]
    for a, b in ring + links:
        key = "~".join(sorted((a, b)))
        if key not in keys:
            keys.add(key)
            out.append((a, b))
    return out


def make_plan(report: dict, good: list[str] | None = None, listed: list[str] | None = None,
              leaves: dict[str, str] | None = None) -> Plan:
    """The plan for a fleet report's data; `good`: the known-good nodes to pair with (--good) instead of
    every node that passed."""
    suspects, passed, left_out = classify(report, listed)
    names = {s.node: s for s in suspects}
    if good:
        known = {n.get("node") for n in report.get("nodes") or []}
        for g in good:
            if g in names:
                raise PlanError(f"--good {g}: it is a suspect ({'; '.join(names[g].why)}); a known-good partner must "
                                "have passed everything")
            out = dict(left_out)
            if g in out:
                raise PlanError(f"--good {g}: {out[g]}; a known-good partner must have passed everything")
            if g not in known:
                raise PlanError(f"--good {g}: no such node in the fleet report; name nodes the report has")
        passed = sorted(dict.fromkeys(good))
    plan = Plan(suspects, passed, left_out=left_out, leaves=dict(leaves or {}), good_given=bool(good))
    plan.partners = choose_partners(plan.suspect_names, passed, plan.leaves)
    plan.controls = control_pairs(plan.partners)
    plan.between = suspect_pairs(suspects)
    return plan


def render(plan: Plan) -> str:
    """The plan as people read it (without --run): who is suspected and why, the pairs and what each
    outcome would point at."""
    if not plan.suspects:
        lines = ["nothing to localize: no node failed or was named slow by the fleet report"]
        lines += [f"left out: {n}: {why}" for n, why in plan.left_out]
        return "\n".join(lines)
    lines = [f"suspects ({len(plan.suspects)}):"]
    lines += [f"  {s.node}: {'; '.join(s.why)}" for s in plan.suspects]
    source = "given with --good" if plan.good_given else "passed, not below the fleet, no end of a slow link"
    lines.append(f"known-good nodes ({len(plan.good)}, {source}): {', '.join(plan.good) or 'none'}")
    lines += [f"left out: {n}: {why}" for n, why in plan.left_out]
    lines.append(f"pairs ({len(plan.pairs)}), all_reduce between the two nodes' GPUs at the floor size "
                 "(the pair check of `wirecheck fleet multinode`):")
    lines.append(f"  reference, two known-good nodes: {_pairs(plan.controls) or 'none (fewer than 2 good partners)'}")
    for s in plan.suspect_names:
        partners = plan.partners.get(s, [])
        lines.append(f"  {s} with {len(partners)} good partner(s): {', '.join(partners) or 'none'}; leaf switch: "
                     + _leaf_note(plan, s))
    if plan.between:
        lines.append(f"  suspects with each other: {_pairs(plan.between)}")
    parts = words.DIAGNOSIS_PARTS  # the parts as the findings will name them
    lines.append(f"what each outcome points at: slow with every good partner: {parts['fleet_node']}; two suspects "
                 f"slow only together, each fine with its good partners: the path between them ({parts['fleet_path']}); "
                 "slow with some partners only: not localized (named); fine with all: not reproduced")
    short = [s for s in plan.suspect_names if len(plan.partners.get(s, [])) < MIN_PARTNERS]
    if short:
        lines.append(f"note: {', '.join(short)} get(s) fewer than {MIN_PARTNERS} good partners: the node cannot be "
                     "told from the path there; pass more with --good")
    return "\n".join(lines)


def _pairs(pairs: list[tuple[str, str]]) -> str:
    return ", ".join(f"{a}-{b}" for a, b in pairs)


def _leaf_note(plan: Plan, suspect: str) -> str:
    if not plan.leaves or plan.leaves.get(suspect) is None:
        return "could not tell (the records do not say which leaf switch a node is on; --leaves FILE does)"
    shared = plan.shared_leaf(suspect)
    if shared:
        return f"{', '.join(shared)} share(s) its leaf {plan.leaves[suspect]} (no other good node to take)"
    return f"every partner on another leaf than its {plan.leaves[suspect]}"


def read_leaves(path: str) -> dict[str, str]:
    """`--leaves FILE`: "NODE LEAF" per line (# comments), e.g. from ibnetdiscover or the site's inventory."""
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise PlanError(f"--leaves {path}: cannot read it ({exc}); give a file of 'NODE LEAF' lines") from None
    out = {}
    for number, line in enumerate(lines, 1):
        words = line.split("#", 1)[0].split()
        if not words:
            continue
        if len(words) != 2:
            raise PlanError(f"--leaves {path}, line {number}: {line.strip()[:60]!r}; write 'NODE LEAF' (two words)")
        out[words[0]] = words[1]
    return out
