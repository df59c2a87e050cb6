"""Each GPU and placement against its own history: the same GPU (by serial or UUID, never its index)
or placement, the same figure, its last runs in a folder of records.

A GPU that loses 13 % over a month passes every floor made for its model, and on a one-GPU node, or
where every GPU of a node degrades together, no peer stands out; its own past does. The limit is
the history's median less its own measured noise (thresholds.yaml `history:`): a steady figure is
held tightly, a noisy one loosely, and one too noisy to hold the rule is said so, not passed. With
nothing to compare (night one, a GPU swapped in) it is said, not failed: the run starts the history.

The inputs are the history's figures themselves (values, dates, records), so `wirecheck judge`
judges a recorded run again without the folder. tests/test_history.py gathers them (figures_of,
past_figures, history_inputs): the GPU figures are those the checks declare floors for.
"""

from __future__ import annotations

import statistics
from pathlib import Path

from wirecheck.checks import check, gpu_figures
from wirecheck.checks.advice import Advice
from wirecheck.core.peer_stats import relative_spread
from wirecheck.core.verdict import FAIL, PASS, Verdict, cite, skip
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


ADVICE = Advice(
    "this GPU or placement is slower than it was on its own earlier runs, by more than the figure's noise: it "
    "degraded (clocks, power limit, cooling, a link) even if it still passes its model's floor",
    "compare `nvidia-smi -q -d CLOCK,PERFORMANCE,POWER` and `nvidia-smi nvlink -s` with a good night; the history "
    "in the message names the runs; reseat or replace the GPU if it stays low")


@check("history", advice=ADVICE, limits=(HISTORY,))
def history(thresholds, *, figure: str, key: str, subject: str, where: str, kind: str, value: float,
            history: list, identified: bool = True, swapped: dict | None = None, simulated: bool = False,
            unit: str | None = None) -> Verdict:
    """`value` against the median of `history` ([{value, date, record}], oldest first, the same
    subject's earlier runs) less max(min_margin, mad_k x the history's spread). `unit`: the unit it
    shows in where its declaration says it (a GPU figure's floor); None: its kind's."""
    what = f"{figure} against its own history ({key})"
    shown = _fmt(kind, value, unit)
    unit, scale = display(kind, unit)
    if simulated:
        return skip(what, where, "simulation: CPU figures have no history worth keeping")
    if not identified:
        return skip(what, where, f"{subject}: the record names no GPU serial or UUID, only its slot: no history is "
                                 f"kept for a slot (another GPU may sit in it); measured {shown}")
    rule = thresholds.history
    past = list(history)[-rule.runs:]
    if len(past) < rule.min_runs:
        if swapped:
            start = (f"{subject} replaces {swapped.get('was')} in {swapped.get('slot')} (last seen "
                     f"{str(swapped.get('date', '?'))[:10]}): a new GPU starts a new history")
        elif not past:
            start = f"first run of {subject}: nothing to compare yet, its history starts with this run"
        else:
            start = f"{subject} has {len(past)} earlier run(s): {_past(past, kind, unit)}"
        return skip(what, where, f"{start}; measured {shown}; compared from {rule.min_runs} earlier runs on "
                                 f"({rule.yaml_path}.min_runs)", measured=value * scale, unit=unit, rule="history")
    values = [float(h["value"]) for h in past]
    median, noise = statistics.median(values), relative_spread(values)
    margin = max(rule.min_margin, rule.mad_k * noise)
    context = (f"the median {_fmt(kind, median, unit)} of its last {len(past)} runs less {margin * 100:.1f} % (max of "
               f"{rule.min_margin * 100:g} % and {rule.mad_k:g} x its spread {noise * 100:.2f} %)")
    if margin > rule.max_margin:
        return skip(what, where, f"{subject}: too noisy to judge against its history: {context} is wider than "
                                 f"{rule.max_margin * 100:g} % ({rule.yaml_path}.max_margin); narrow it with {NARROWING}; "
                                 f"history: {_past(past, kind, unit)}", measured=value * scale, unit=unit, rule="history")
    floor = median * (1 - margin)
    ok = value >= floor
    verb = f">= {_fmt(kind, floor, unit)}" if ok else f"< {_fmt(kind, floor, unit)}"
    message = (f"{what} on {where}, {subject}: measured {shown} {verb}, {context}; history: {_past(past, kind, unit)} "
               f"({cite(rule.yaml_path, rule.source)})")
    if not ok:
        message += (f". {(1 - value / median) * 100:.1f} % below its own median: this GPU or its links lost speed since "
                    "those runs; compare its clocks, power limit and link state with them (nvidia-smi -q), then reseat "
                    "or replace it")
    return Verdict("", what, where, PASS if ok else FAIL, message, measured=value * scale, unit=unit,
                   limit={"min": floor * scale}, source=rule.source, yaml_path=rule.yaml_path, rule="history",
                   details={"median": median * scale, "spread": noise, "margin": margin, "runs": len(past)})


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
              "history": [{"value": p.value, "date": p.started, "record": p.record} for p in mine[-runs:]]}
    if not mine:
        others = sorted((p for p in past if p.slot == fig.slot and same(p) and p.subject != fig.subject),
                        key=lambda p: p.started)
        if others:
            inputs["swapped"] = {"was": others[-1].subject, "slot": fig.slot, "date": others[-1].started}
    return inputs
