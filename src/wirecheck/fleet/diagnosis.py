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
part, culprit, evidence, figures), so records.culprit and the drain reason read them alike. This module
decides what the pairs say (which result, which partners were slow); every word of it, the finding's line
and its evidence, is written by wirecheck.core.render from that structure.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from wirecheck.core import render
from wirecheck.core.pair_schedule import pair_key
from wirecheck.core.peer_stats import Reference, below_reference, reference_of
from wirecheck.core.verdict import FAIL, PASS, Verdict
from wirecheck.diagnose.findings import CHECK, FOUND, NOT_LOCALIZED, NOT_REPRODUCED, exit_code
from wirecheck.fleet.diagnose_plan import MIN_PARTNERS, Plan

NODE, PATH = "fleet_node", "fleet_path"  # a finding about one node, or about the path between two
SLOW, FINE, UNMEASURED = "slow", "fine", "not measured"

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

    def other(self, node: str) -> str:
        return self.b if self.a == node else self.a


@dataclass
class PairFinding:
    """What the pairs say about one suspect (NODE) or the path between two (PATH): the structure its words
    are made from."""
    kind: str  # NODE | PATH
    subject: str  # the node, or "a~b"
    result: str  # diagnose.findings.RESULTS
    nodes: tuple[str, ...]
    median: float | None  # the reference's median busbw, bytes/s; None: no pair of two good nodes measured
    pairs: list[tuple[PairFigure, bool]] = field(default_factory=list)  # its pairs, and whether with a suspect
    slow: list[str] = field(default_factory=list)  # a node's good partners it was slow with
    fine: list[str] = field(default_factory=list)  # and fine with
    paths: list[tuple[str, str]] = field(default_factory=list)  # a node's paths found: (the other end, pair key)
    figures: dict = field(default_factory=dict)

    @property
    def summary(self) -> str:
        """The finding's one line (the culprit when found)."""
        if self.kind == PATH:
            (f, _), = self.pairs
            return render.diagnosis_path(f.a, f.b, f.busbw, self.median)
        return render.diagnosis_node(self.subject, self.result, self.slow, self.fine, self.median is not None,
                                     self.paths)

    @property
    def evidence(self) -> list[str]:
        """What each of its pairs measured, one line each."""
        if self.kind == PATH:
            (f, _), = self.pairs
            return [render.diagnosis_path_evidence(f.a, f.b, f.busbw, f.below)]
        return [render.diagnosis_pair(f.other(self.subject), f.status, f.busbw, f.below, f.below_floor, self.median,
                                      between) for f, between in self.pairs]

    @property
    def culprit(self) -> str | None:
        return self.summary if self.result == FOUND else None

    @property
    def part(self) -> str | None:
        return render.diagnosis_part(self.kind, self.subject) if self.result == FOUND else None

    def verdict(self) -> Verdict:
        """Found and not localized fail (the slowness is real); not reproduced passes, as `diagnose`'s do."""
        summary, evidence = self.summary, self.evidence
        return Verdict(CHECK, render.diagnosis_what(self.kind, self.subject), self.subject,
                       PASS if self.result == NOT_REPRODUCED else FAIL, "\n".join(render.diagnosis_lines(summary, evidence)),
                       measured=self.result, inputs={"kind": self.kind, "nodes": list(self.nodes)},
                       details={"result": self.result, "part": self.part, "culprit": self.culprit, "summary": summary,
                                "evidence": evidence, "figures": self.figures, "nodes": list(self.nodes)})


def _figure(a: str, b: str, got: dict | None, ref: Reference | None, rule) -> PairFigure:
    if not got or not isinstance(got.get("busbw_bytes_per_s"), (int, float)):
        return PairFigure(a, b, None, None, False, UNMEASURED)
    busbw, floor = float(got["busbw_bytes_per_s"]), bool(got.get("below_floor"))
    if ref is None:
        return PairFigure(a, b, busbw, None, floor, SLOW if floor else UNMEASURED)
    bl = below_reference(busbw, ref, rule.max_below_median, rule.mad_k)
    return PairFigure(a, b, busbw, bl.below, floor, SLOW if bl.named or floor else FINE)


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
        slow = [f.other(s) for f in mine if f.status == SLOW]
        fine = [f.other(s) for f in mine if f.status == FINE]
        n = len(slow) + len(fine)
        if ref is None:
            result = NOT_LOCALIZED
        elif n >= MIN_PARTNERS and len(slow) == n:
            result = FOUND
        elif slow or n == 0:
            result = NOT_LOCALIZED
        else:
            clean.add(s)
            result = NOT_REPRODUCED
        findings[s] = PairFinding(NODE, s, result, (s,), median, [(f, False) for f in mine], slow, fine,
                                  figures={"good_partners": {"slow": slow, "fine": fine}})

    paths = []
    for a, b in plan.between:
        f = figs[pair_key(a, b)]
        for end in (a, b):
            findings[end].pairs.append((f, True))
        if f.status != SLOW:
            continue
        if a in clean and b in clean:
            paths.append(PairFinding(PATH, pair_key(a, b), FOUND, (a, b), median, [(f, True)],
                                     figures={"busbw": f.busbw / 1e9, "below": f.below}))
            for end in (a, b):
                findings[end].paths.append((f.other(end), pair_key(a, b)))
    return [findings[s] for s in plan.suspect_names] + paths, figures
