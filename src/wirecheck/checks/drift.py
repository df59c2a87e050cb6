"""Each GPU and placement over weeks: a slow loss the median rule cannot see.

The history rule holds tonight against the median of the last runs; a GPU that loses a little every
night drags that median with it and stays within a few nights' loss of it (0.25 % a night sits 1.4 %
below the median of the last ten: inside a 1.5 % margin for ever). The drift rule reads the same
figures over a longer window (thresholds.yaml `history.drift`) with Page's CUSUM on the series
standardized by its own reference: the median and noise of its oldest runs (wirecheck.core.trend). A
fall that the CUSUM finds warns once it has lost `warn_at` and fails at `fail_at`, naming the run where
the fall began, so the operator sees when it started and at what rate, weeks before the median rule.
scripts/bench/sensitivity.py measured it against the robust slope on the recorded runs
(docs/records.md: why CUSUM).

Its inputs are the history check's (the same subject's values, dates and records, oldest first) over the
drift window, so `wirecheck judge` judges it again without the folder.
"""

from __future__ import annotations

import statistics

from wirecheck.checks import check
from wirecheck.checks.history import HISTORY, _fmt, _past, margin_of
from wirecheck.checks.words import Words
from wirecheck.core.resolution import percent
from wirecheck.core.trend import cusum, detrended_noise
from wirecheck.core.verdict import FAIL, PASS, WARN, Verdict, skip
from wirecheck.records.figures import display

WORDS = Words(
    what="{figure} drift over its history ({key})",
    means="this GPU or placement has been getting slower run after run since the run named, by more than its noise: "
          "a slow degradation (cooling, a fan, thermal paste, a power limit, a link retraining) that each night's "
          "comparison with the last few nights cannot see",
    todo="look at its figure over time in the report (the trend), compare `nvidia-smi -q -d CLOCK,PERFORMANCE,POWER,"
         "TEMPERATURE` with a run before the fall began, and check what changed on the node then; replace the GPU if "
         "it keeps falling",
    say={"simulation": "simulation: CPU figures have no history worth keeping",
         "slot": "{subject}: the record names no GPU serial or UUID: no history is kept for a slot",
         "no_rule": "{path} has no history.drift rule (a file older than it): drift is not judged; copy it from the "
                    "thresholds.yaml shipped with wirecheck",
         "too_few": "{subject}: {runs} runs with this one; the drift rule reads {needed} ({baseline} for its reference, "
                    "{yaml_path}.baseline, then {min_after}, .min_after)",
         "reference": "its reference {reference} (the median of its runs {first} to {last}, noise {noise})",
         "noisy": "{subject}: too noisy to judge its drift: {reference}; over its last {runs} runs the history rule's "
                  "margin is {margin}, wider than {max_margin} ({yaml_path}.max_margin)",
         "too_new": "CUSUM {statistic:.1f} past {h:g} on {since} run(s): a fall is judged from {min_after} on",
         "small": "CUSUM {statistic:.1f} past {h:g}, but a loss under the {warn_at} it warns from",
         "within": "CUSUM {statistic:.1f} of {h:g} noise units",
         "none": "no run below its reference by more than its allowance",
         "steady": "{subject}: no fall over its last {runs} runs ({found}; {loss} from {reference}; it warns from "
                   "{warn_at} below once the CUSUM passes {h:g}, fails from {fail_at})",
         "falling": "{subject}: falling since {began} (run {index} of {runs}: {record}), {per_run} a run on its trend; "
                    "now {now}, {loss} below {reference} (CUSUM {statistic:.1f} > {h:g}); it fails at {fail_at} "
                    "below; runs since shortly before: {past}",
         "slow": "it lost speed slowly enough that each night looked like the last: compare its clocks, power and "
                 "temperature with a run before {began}"})


def _date(entry: dict) -> str:
    return str(entry.get("date") or "?")[:10]


@check("drift", words=WORDS, limits=(HISTORY,))  # history.drift, with the history rule's margin
def drift(thresholds, *, figure: str, key: str, subject: str, where: str, kind: str, value: float,
          history: list, identified: bool = True, swapped: dict | None = None, simulated: bool = False,
          unit: str | None = None, within: float | None = None) -> Verdict:
    """`value` at the end of `history` ([{value, date, record, within?}], oldest first: the same subject's
    earlier runs over the drift window) searched for a fall (wirecheck.core.trend.cusum)."""
    what = WORDS.judged(figure=figure, key=key)
    unit_shown, scale = display(kind, unit)
    if simulated:
        return skip(what, where, WORDS.said("simulation"))
    if not identified:
        return skip(what, where, WORDS.said("slot", subject=subject))
    rule = thresholds.history.drift
    if rule is None:
        return skip(what, where, WORDS.said("no_rule", path=thresholds.path))
    past = list(history)[-(rule.runs - 1):]
    series = [float(h["value"]) for h in past] + [float(value)]
    dates = [_date(h) for h in past] + ["this run"]
    needed = rule.baseline + rule.min_after
    if len(series) < needed:
        return skip(what, where, WORDS.said("too_few", subject=subject, runs=len(series), needed=needed,
                                            baseline=rule.baseline, yaml_path=rule.yaml_path, min_after=rule.min_after),
                    measured=value * scale, unit=unit_shown, rule="history")
    measured = [w for w in [within] + [h.get("within") for h in past] if isinstance(w, (int, float)) and w > 0]
    # the noise it standardizes by: at least the floor, the figure's within-run noise and the whole series' noise
    # about its trend (a quiet reference of 8 runs must not make a noisy figure look like it fell)
    floor = max(rule.min_noise, statistics.median(measured) if measured else 0.0, detrended_noise(series[:-1]))
    d = cusum(series, rule.baseline, floor, rule.k, rule.h)
    reference = WORDS.said("reference", reference=_fmt(kind, d.reference, unit), first=dates[0],
                           last=dates[rule.baseline - 1], noise=percent(d.sigma))
    # A figure the history rule cannot judge (its margin over these runs wider than max_margin) is no figure
    # to find a slow fall in either: its noise alone would make one.
    margin = margin_of(thresholds.history, series[:-1], [within] + [h.get("within") for h in past], figure).margin
    if margin > thresholds.history.max_margin or rule.noise_k * d.sigma > thresholds.history.max_margin:
        return skip(what, where, WORDS.said("noisy", subject=subject, reference=reference, runs=len(series) - 1,
                                            margin=percent(margin), max_margin=percent(thresholds.history.max_margin),
                                            yaml_path=thresholds.history.yaml_path),
                    measured=value * scale, unit=unit_shown, rule="history")
    warn_at, fail_at = rule.bounds(d.sigma)
    bound = d.reference * (1 - fail_at)
    common = dict(measured=value * scale, unit=unit_shown, source=rule.source, yaml_path=rule.yaml_path,
                  rule="history", limit={"min": bound * scale}, bound="floor",
                  fmt="number" if kind == "throughput" else "tenths")
    details = {"reference": d.reference * scale, "noise": d.sigma, "cusum": d.statistic, "h": rule.h,
               "loss": d.loss, "per_run": d.per_run, "began": None if d.began is None else dates[d.began],
               "began_index": d.began, "runs": len(series), "warn_at": warn_at, "fail_at": fail_at}
    # a fall is runs, not one night: a single low run is the history rule's to judge (min_after runs since it began)
    sustained = d.began is not None and len(series) - d.began >= rule.min_after
    if not d.alarm or not sustained or d.loss < warn_at:
        facts = dict(statistic=d.statistic, h=rule.h)
        found = (WORDS.said("too_new", since=len(series) - d.began, min_after=rule.min_after, **facts)
                 if d.alarm and not sustained else
                 WORDS.said("small", warn_at=percent(warn_at), **facts) if d.alarm
                 else WORDS.said("within", **facts) if d.statistic > 0 else WORDS.said("none"))
        note = WORDS.said("steady", subject=subject, runs=len(series), found=found, loss=percent(d.loss),
                          reference=reference, warn_at=percent(warn_at), h=rule.h, fail_at=percent(fail_at))
        return Verdict("", what, where, PASS, note=note, details=details, **common)
    began = d.began if d.began is not None else 0
    note = WORDS.said("falling", subject=subject, began=dates[began], index=began + 1, runs=len(series),
                      record=past[began].get("record") if began < len(past) else "this run",
                      per_run=percent(d.per_run), now=_fmt(kind, d.reference * (1 - d.loss), unit),
                      loss=percent(d.loss), reference=reference, statistic=d.statistic, h=rule.h,
                      fail_at=f"{percent(fail_at)} ({_fmt(kind, bound, unit)})",
                      past=_past(past[max(began - 2, 0):], kind, unit))
    outcome = FAIL if d.loss >= fail_at else WARN
    return Verdict("", what, where, outcome, note=note, hint=WORDS.said("slow", began=dates[began]) if outcome == FAIL else "",
                   details=details, **common)
