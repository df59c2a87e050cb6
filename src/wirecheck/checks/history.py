"""Each GPU and placement against its own history: the same GPU (by serial or UUID, never its index)
or placement, the same figure, its last runs in a folder of records.

A GPU that loses 13 % over a month passes every floor made for its model, and on a one-GPU node, or
where every GPU of a node degrades together, no peer stands out; its own past does. The limit is
the history's median less its own measured noise (thresholds.yaml `history:`): the runs' spread run to
run and each figure's spread within its run (its repeats), widened for few runs to a prediction bound at
the rule's false-alarm rate (`margin`). A steady figure is held tightly (HBM copy to the rule's 0.5 %), a
noisy one loosely, one too noisy to hold the rule is said so, not passed, and every verdict says the loss
its bound catches (wirecheck.core.resolution). With nothing to compare (night one, a GPU swapped in) it
is said, not failed: the run starts the history.

The inputs are the history's figures themselves (values, dates, records), so `wirecheck judge`
judges a recorded run again without the folder. tests/test_history.py gathers them (figures_of,
past_figures, history_inputs): the GPU figures are those the checks declare floors for.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from pathlib import Path

from wirecheck.checks import check, gpu_figures
from wirecheck.checks.words import Words
from wirecheck.core.peer_stats import relative_spread
from wirecheck.core.resolution import Resolution, of_normal, percent, prediction_factor
from wirecheck.core.verdict import FAIL, PASS, Verdict, skip
from wirecheck.records import figures as records_figures
from wirecheck.records.figures import UNITS, Figure, display
from wirecheck.records.file import RunRecord
from wirecheck.thresholds.baselines import HistoryRule
from wirecheck.thresholds.declared import Rule

HISTORY = Rule("history", HistoryRule, '{runs: 10, min_runs: 3, mad_k: "3 x", min_margin: "3 %", max_margin: "10 %", '
               'figures: [...], source: ...}', optional=True)

NARROWING = ("more calls per figure (the figure's iters in thresholds.yaml) or a longer window, or take the figure "
             "out of history.figures")


def _fmt(kind: str, value: float, unit: str | None = None) -> str:
    unit, scale = display(kind, unit)
    return f"{value * scale:,.0f} {unit}" if kind == "throughput" else f"{value * scale:.1f} {unit}"


def _past(history: list[dict], kind: str, unit: str | None = None) -> str:
    return ", ".join(f"{_fmt(kind, h['value'], unit)} ({str(h.get('date', '?'))[:10]})" for h in history)


def figures_of(run: RunRecord) -> list[Figure]:
    """The stable figures of `run`, its GPU figures those the checks declare floors for."""
    return records_figures.run_figures(run, gpu_figures())


def past_figures(folder: str | Path, exclude: str | Path | None = None) -> tuple[list[Figure], list[str]]:
    """The trusted figures of every hardware run under `folder` but `exclude`, and the files left out
    with why (wirecheck.records.figures.history_figures), with the GPU figures the checks declare."""
    return records_figures.history_figures(folder, gpu_figures(), exclude)


@dataclass(frozen=True)
class Margin:
    """How far below its history's median a figure may fall: max(min_margin, factor x noise)."""

    margin: float
    noise: float  # the relative noise the margin is made of (the largest of the measures below)
    factor: float
    spread: float  # run to run, scaled MAD / median
    sd: float | None  # run to run, standard deviation / mean (None: a rule without the prediction bound)
    within: float | None  # within a run: the median standard error of its repeats, where the record has them
    runs: int
    least: float = 0.0  # the least margin it may be (min_margin, or the figure's own in min_margins)

    def words(self, rule) -> str:
        parts = [f"run to run {percent(self.spread)} (scaled MAD)"]
        if self.sd is not None:
            parts.append(f"{percent(self.sd)} (standard deviation)")
        if self.within is not None:
            parts.append(f"within a run {percent(self.within)}")
        how = (f"{self.factor:.1f} x (the one-sided {rule.false_alarms * 100:g} % prediction bound for {self.runs} runs)"
               if rule.false_alarms else f"{self.factor:g} x")
        return (f"{percent(self.margin)} = max({percent(self.least)}, {how} its noise {percent(self.noise)}: "
                f"{', '.join(parts)})")

    def resolution(self) -> Resolution:
        """The loss this bound catches in 95 % of runs and its false alarms, for a run as noisy as these runs
        were, measured against a median of `runs` runs (whose own noise is pi / 2n of a run's variance)."""
        sigma = self.noise * math.sqrt(1.0 + math.pi / (2 * self.runs)) if self.runs else self.noise
        return of_normal(self.margin, sigma, f"its runs' noise {percent(self.noise)}")


def margin_of(rule, values: list[float], within: list[float | None] = (), figure: str | None = None) -> Margin:
    """The history margin for `values` (the same subject's earlier figures) and the within-run noise of
    this run's figure and theirs (None where a record holds no repeats); `figure`: its own least margin
    (rule.min_margins), where the rule gives it one."""
    n = len(values)
    spread = relative_spread(values)
    measured = [w for w in within if isinstance(w, (int, float)) and w > 0]
    inside = statistics.median(measured) if measured else None
    if rule.false_alarms:
        mean = math.fsum(values) / n
        sd = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (n - 1)) / mean if n >= 2 and mean > 0 else 0.0
        factor = prediction_factor(n, rule.false_alarms) if n >= 2 else float("inf")
        noise = max(spread, sd, inside or 0.0)
    else:  # a file written before the prediction bound: its own rule, mad_k x the scaled MAD
        sd, factor = None, rule.mad_k
        noise = max(spread, inside or 0.0)
    least = rule.least_margin(figure) if hasattr(rule, "least_margin") else rule.min_margin
    return Margin(max(least, factor * noise), noise, factor, spread, sd, inside, n, least)


WORDS = Words(
    what="{figure} against its own history ({key})",
    means="this GPU or placement is slower than it was on its own earlier runs, by more than the figure's noise: it "
          "degraded (clocks, power limit, cooling, a link) even if it still passes its model's floor",
    todo="compare `nvidia-smi -q -d CLOCK,PERFORMANCE,POWER` and `nvidia-smi nvlink -s` with a good night (the "
         "history in the message names the runs); reseat or replace the GPU if it stays low",
    say={"simulation": "simulation: CPU figures have no history worth keeping",
         "slot": "{subject}: the record names no GPU serial or UUID, only its slot: no history is kept for a slot "
                 "(another GPU may sit in it); measured {shown}",
         "swapped": "{subject} replaces {was} in {slot} (last seen {date}): a new GPU starts a new history",
         "first": "first run of {subject}: nothing to compare yet, its history starts with this run",
         "earlier": "{subject} has {n} earlier run(s): {past}",
         "too_few": "{start}; measured {shown}; compared from {min_runs} earlier runs on ({yaml_path}.min_runs)",
         "context": "the median {median} of its last {n} runs less {margin}",
         "noisy": "{subject}: too noisy to judge against its history: {context} is wider than {max_margin:g} % "
                  "({yaml_path}.max_margin); narrow it with {narrowing}; history: {past}",
         "judged": "{context}; this bound {resolution}; history: {past}",
         "below": "{below:.1f} % below its own median: this GPU or its links lost speed since those runs",
         "place": "{where} ({subject})"})


@check("history", words=WORDS, limits=(HISTORY,))
def history(thresholds, *, figure: str, key: str, subject: str, where: str, kind: str, value: float,
            history: list, identified: bool = True, swapped: dict | None = None, simulated: bool = False,
            unit: str | None = None, within: float | None = None) -> Verdict:
    """`value` against the median of `history` ([{value, date, record, within?}], oldest first, the same
    subject's earlier runs) less its margin (margin_of). `unit`: the unit it shows in where its
    declaration says it (a GPU figure's floor); None: its kind's. `within`: the figure's standard error
    within this run (its repeats), where the record has it."""
    what = WORDS.judged(figure=figure, key=key)
    shown = _fmt(kind, value, unit)
    unit, scale = display(kind, unit)
    if simulated:
        return skip(what, where, WORDS.said("simulation"))
    if not identified:
        return skip(what, where, WORDS.said("slot", subject=subject, shown=shown))
    rule = thresholds.history
    past = list(history)[-rule.runs:]
    if len(past) < rule.min_runs:
        if swapped:
            start = WORDS.said("swapped", subject=subject, was=swapped.get("was"), slot=swapped.get("slot"),
                               date=str(swapped.get("date", "?"))[:10])
        elif not past:
            start = WORDS.said("first", subject=subject)
        else:
            start = WORDS.said("earlier", subject=subject, n=len(past), past=_past(past, kind, unit))
        return skip(what, where, WORDS.said("too_few", start=start, shown=shown, min_runs=rule.min_runs,
                                            yaml_path=rule.yaml_path), measured=value * scale, unit=unit, rule="history")
    values = [float(h["value"]) for h in past]
    median = statistics.median(values)
    m = margin_of(rule, values, [within] + [h.get("within") for h in past], figure)
    margin = m.margin
    context = WORDS.said("context", median=_fmt(kind, median, unit), n=len(past), margin=m.words(rule))
    if margin > rule.max_margin:
        return skip(what, where, WORDS.said("noisy", subject=subject, context=context, max_margin=rule.max_margin * 100,
                                            yaml_path=rule.yaml_path, narrowing=NARROWING, past=_past(past, kind, unit)),
                    measured=value * scale, unit=unit, rule="history")
    resolution = m.resolution()
    floor = median * (1 - margin)
    ok = value >= floor
    return Verdict("", what, where, PASS if ok else FAIL, measured=value * scale, unit=unit,
                   fmt="number" if kind == "throughput" else "tenths",
                   limit={"min": floor * scale}, bound="floor", source=rule.source, yaml_path=rule.yaml_path,
                   rule="history", place=WORDS.said("place", where=where, subject=subject),
                   note=WORDS.said("judged", context=context, resolution=resolution.words(), past=_past(past, kind, unit)),
                   hint="" if ok else WORDS.said("below", below=(1 - value / median) * 100),
                   details={"median": median * scale, "spread": m.spread, "noise": m.noise, "margin": margin,
                            "runs": len(past), "resolution": resolution.as_dict()})


def history_inputs(fig: Figure, past: list[Figure], runs: int) -> dict:
    """The history check's inputs for `fig` from the earlier figures `past` (any subjects, any order):
    the same subject's last `runs` values, oldest first; where it has none, whether another GPU or
    placement held its slot (a swap)."""
    def same(p: Figure) -> bool:  # the same figure, at the same level (a training figure: of the same workload,
        # from a run of the same training set)
        return (p.key == fig.key and (not fig.level or not p.level or p.level == fig.level)
                and (not fig.workload or not p.workload or p.workload == fig.workload)
                and (not fig.training_set or not p.training_set or p.training_set == fig.training_set))

    mine = sorted((p for p in past if p.subject == fig.subject and same(p)), key=lambda p: p.started)
    inputs = {"figure": fig.figure, "key": fig.yaml_path, "subject": fig.subject, "where": fig.where,
              "kind": fig.kind, "value": fig.value, "identified": fig.identified,
              # its own unit only where its kind's would not show it (the inputs stay as older versions read them)
              **({"unit": fig.unit} if fig.unit and fig.unit != UNITS.get(fig.kind, (None,))[0] else {}),
              "history": [{"value": p.value, "date": p.started, "record": p.record,
                           **({"within": p.within} if p.within else {})} for p in mine[-runs:]],
              **({"within": fig.within} if fig.within else {})}
    if not mine:
        others = sorted((p for p in past if p.slot == fig.slot and same(p) and p.subject != fig.subject),
                        key=lambda p: p.started)
        if others:
            inputs["swapped"] = {"was": others[-1].subject, "slot": fig.slot, "date": others[-1].started}
    return inputs
