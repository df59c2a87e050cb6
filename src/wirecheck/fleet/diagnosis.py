"""What the pairs of `wirecheck fleet diagnose` add up to: a pure function of the measured pair figures.

Each pair's busbw is held against the pairs of two known-good nodes measured in the same run (their
median and scaled MAD, with the fleet's pair rule, thresholds.yaml `fleet.<mode>.pairs`), and against the
pair floor (the pair's own `busbw` verdict of the multi-node run: the network floor from the NICs' line
rate). A pair below either is slow. Then, per suspect:

- slow with every good partner (2 at least): the node is the culprit (its NICs, its PCIe path to them,
  or its GPUs): found;
- fine with its good partners but slow with another suspect that is fine with its own: the path between
  the two (the switch or cables between their leaves): found, one finding for the pair;
- slow with some good partners only (or with its only one): not localized, naming which;
- fine with every partner: not reproduced.

Findings are verdicts of check `diagnosis`, shaped as `wirecheck diagnose` writes them (details: result,
part, culprit, evidence, figures), so records.culprit and the drain reason read them alike.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from wirecheck.checks.fleet import format_bw
from wirecheck.core.pair_schedule import pair_key
from wirecheck.core.peer_stats import Reference, below_reference, reference_of
from wirecheck.core.verdict import FAIL, PASS, Verdict
from wirecheck.diagnose.findings import CHECK, FOUND, NOT_LOCALIZED, NOT_REPRODUCED, exit_code
from wirecheck.fleet.diagnose_plan import MIN_PARTNERS, Plan

NODE, PATH = "fleet_node", "fleet_path"  # a finding about one node, or about the path between two
SLOW, FINE, UNMEASURED = "slow", "fine", "not measured"
NODE_PART = "the node (its NICs, its PCIe path to them, or its GPUs)"
PATH_PART = "the switch or cables between their leaves"

__all__ = ["judge", "exit_code", "PairFinding", "PairFigure", "NODE", "PATH"]


@dataclass(frozen=True)
class PairFigure:
    """One pair as judged: its busbw (None: not measured), how far below the reference, and the status."""
    a: str
    b: str
    busbw: float | None  # bytes/s
    below: float | None  # fraction of the reference median it is under
    below_floor: bool
    status: str  # SLOW | FINE | UNMEASURED

    def text(self, partner: str, median: float | None) -> str:
        if self.status == UNMEASURED:
            return f"with {partner}: not measured (the pair run broke before it, or it was not planned)"
        side = f"{abs(self.below) * 100:.0f} % {'below' if self.below >= 0 else 'above'}"
        floor = "; below the pair floor" if self.below_floor else ""
        return f"with {partner}: {format_bw(self.busbw)}, {side} the reference {format_bw(median)}{floor}: {self.status}"


@dataclass
class PairFinding:
    kind: str  # NODE | PATH
    subject: str  # the node, or "a~b"
    result: str  # diagnose.findings.RESULTS
    summary: str  # one line: the culprit when found
    nodes: tuple[str, ...]
    evidence: list[str] = field(default_factory=list)
    figures: dict = field(default_factory=dict)

    @property
    def culprit(self) -> str | None:
        return self.summary if self.result == FOUND else None

    @property
    def part(self) -> str | None:
        if self.result != FOUND:
            return None
        return self.subject if self.kind == NODE else f"the path {self.subject}"

    def verdict(self) -> Verdict:
        """Found and not localized fail (the slowness is real); not reproduced passes, as `diagnose`'s do."""
        message = "\n".join([self.summary] + [f"  {line}" for line in self.evidence])
        what = f"diagnosis of {'node' if self.kind == NODE else 'the path'} {self.subject} across nodes"
        return Verdict(CHECK, what, self.subject, PASS if self.result == NOT_REPRODUCED else FAIL, message,
                       measured=self.result, inputs={"kind": self.kind, "nodes": list(self.nodes)},
                       details={"result": self.result, "part": self.part, "culprit": self.culprit,
                                "evidence": list(self.evidence), "figures": self.figures, "nodes": list(self.nodes)})


def _figure(a: str, b: str, got: dict | None, ref: Reference | None, rule) -> PairFigure:
    if not got or not isinstance(got.get("busbw_bytes_per_s"), (int, float)):
        return PairFigure(a, b, None, None, False, UNMEASURED)
    busbw, floor = float(got["busbw_bytes_per_s"]), bool(got.get("below_floor"))
    if ref is None:
        return PairFigure(a, b, busbw, None, floor, SLOW if floor else UNMEASURED)
    bl = below_reference(busbw, ref, rule.max_below_median, rule.mad_k)
    return PairFigure(a, b, busbw, bl.below, floor, SLOW if bl.named or floor else FINE)


def _other(fig: PairFigure, node: str) -> str:
    return fig.b if fig.a == node else fig.a


def judge(plan: Plan, measured: dict[str, dict], rule) -> tuple[list[PairFinding], dict]:
    """The findings for `plan` from `measured` ({pair_key: {"busbw_bytes_per_s", "below_floor"}}), judged
    with `rule` (a FleetRule: max_below_median, mad_k); and the figures (reference, every pair), for the
    record. One finding per suspect, one more per path found; the suspects' order."""
    controls = [measured.get(pair_key(a, b)) or {} for a, b in plan.controls]
    values = [float(c["busbw_bytes_per_s"]) for c in controls if isinstance(c.get("busbw_bytes_per_s"), (int, float))]
    ref = reference_of(values) if values else None
    median = ref.median if ref else None
    figs = {pair_key(a, b): _figure(a, b, measured.get(pair_key(a, b)), ref, rule) for a, b in plan.pairs}
    figures = {"unit": "GB/s", "reference": None if ref is None else {
        "median": ref.median / 1e9, "scaled_mad": ref.scaled_mad / 1e9, "n": ref.n,
        "pairs": [pair_key(a, b) for a, b in plan.controls], "max_below_median": rule.max_below_median,
        "mad_k": rule.mad_k, "yaml_path": rule.yaml_path, "source": rule.source},
        "pairs": {k: {"a": f.a, "b": f.b, "busbw": None if f.busbw is None else f.busbw / 1e9, "below": f.below,
                      "below_floor": f.below_floor, "status": f.status} for k, f in figs.items()}}

    findings: dict[str, PairFinding] = {}
    clean: set[str] = set()  # suspects fine with every good partner measured
    for s in plan.suspect_names:
        mine = [figs[pair_key(s, g)] for g in plan.partners.get(s, [])]
        slow = [_other(f, s) for f in mine if f.status == SLOW]
        fine = [_other(f, s) for f in mine if f.status == FINE]
        n = len(slow) + len(fine)
        evidence = [f.text(_other(f, s), median) for f in mine]
        if ref is None:
            summary = (f"node {s}: not localized: no pair of two known-good nodes was measured, so nothing says what a "
                       "pair should reach; run again with at least 2 good partners (--good)")
            result = NOT_LOCALIZED
        elif n >= MIN_PARTNERS and len(slow) == n:
            summary, result = f"node {s}: slow with {n} of {n} good partners: {NODE_PART}", FOUND
        elif slow and fine:
            summary = (f"node {s}: not localized: slow with {', '.join(slow)} ({len(slow)} of {n} good partners), fine "
                       f"with {', '.join(fine)}: those partners' paths, or a node slow only at times")
            result = NOT_LOCALIZED
        elif slow:
            summary = (f"node {s}: not localized: slow with its only measured good partner {slow[0]}: the node or the "
                       "path to it; pass more partners with --good")
            result = NOT_LOCALIZED
        elif n == 0:
            summary, result = f"node {s}: not localized: no pair with a good partner was measured", NOT_LOCALIZED
        else:
            clean.add(s)
            summary, result = f"node {s}: not reproduced: fine with {n} of {n} good partners", NOT_REPRODUCED
        findings[s] = PairFinding(NODE, s, result, summary, (s,), evidence,
                                  {"good_partners": {"slow": slow, "fine": fine}})

    paths = []
    for a, b in plan.between:
        f = figs[pair_key(a, b)]
        for end in (a, b):
            findings[end].evidence.append("suspect " + f.text(_other(f, end), median))
        if f.status != SLOW:
            continue
        if a in clean and b in clean:
            summary = (f"path {a}~{b}: slow only together ({format_bw(f.busbw)} against the reference "
                       f"{format_bw(median)}), each fine with its good partners: {PATH_PART}")
            paths.append(PairFinding(PATH, pair_key(a, b), FOUND, summary, (a, b),
                                     [f"{a}-{b}: {format_bw(f.busbw)}, {f.below * 100:.0f} % below the reference"],
                                     {"busbw": f.busbw / 1e9, "below": f.below}))
            for end in (a, b):
                findings[end].summary += f"; slow only with {_other(f, end)}: the path {pair_key(a, b)}"
    return [findings[s] for s in plan.suspect_names] + paths, figures

