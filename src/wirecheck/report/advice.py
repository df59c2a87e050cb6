"""The report's advice section: the strategy dial's runs beside what the step model predicts for
them, and `wirecheck advise` for a few common model sizes on the record's GPU count (advise/)."""

from __future__ import annotations

from wirecheck.advise.advice import advise, reasons
from wirecheck.advise.figures import FiguresError, from_records
from wirecheck.advise.fits import fit_strategies, grouped
from wirecheck.advise.model import predict_strategy
from wirecheck.advise.slow_part import cost_line, slow_parts
from wirecheck.report.html import Section, note, table

SIZES = (("1B", 1_000_000_000), ("7B", 7_000_000_000), ("13B", 13_000_000_000), ("70B", 70_000_000_000))
SEQ, MICRO_BATCH = 1024, 8  # the suite's own workload, as `wirecheck advise` defaults to


def advice_section(view) -> Section:
    try:
        return _section(view)
    except (FiguresError, ValueError, KeyError, TypeError) as exc:  # an older record's runs lack a figure
        return Section("advice", TITLE).fold(f"No prediction from this record: {type(exc).__name__}: {exc}")


TITLE = "What the wires cost a job: predicted against measured, and advice"


def _section(view) -> Section:
    s = Section("advice", TITLE)
    if view.simulated or not view.strategies:
        return s.fold("No prediction: the record has no strategy runs on GPUs (a simulation, or a selection "
                          "without test_strategies).")
    try:
        figures = from_records([view.run.path])
        fits = fit_strategies(figures)
    except (FiguresError, ValueError) as exc:
        return s.fold(f"No prediction: {exc}")
    if figures.compute is None:
        return s.fold("No prediction: no one-GPU rate in the record.")
    rows = []
    for (name, klass, n), (step, _local, run) in sorted(grouped(figures.runs).items()):
        if name not in fits:
            continue
        tokens_gpu = run.tokens_per_step / n
        try:
            p = predict_strategy(figures, name, run.n_params, run.shape, run.precision, klass, n, fits[name], tokens_gpu)
        except ValueError:
            continue
        measured = run.tokens_per_step / step
        rows.append([name, run.placement, f"{measured:,.0f}", f"{p.tokens_per_s:,.0f}",
                     f"{p.tokens_per_s / measured - 1:+.1%}", p.what_sets_it()])
    s.add(table(["strategy", "placement", "measured tokens/s", "predicted", "error", "what sets it"], rows,
                numeric=(2, 3, 4)))
    s.add(note("The model is fitted on these very runs (overhead on NVLink, overlap on the host path), so this "
               "table shows its fit; its error on runs it did not see is in docs/commands.md (wirecheck advise). "
               f"Compute: {figures.compute.source}."))
    n_gpus = figures.gpu_count
    advice_rows, why = [], []
    for label, n_params in SIZES:
        try:
            a = advise(figures, n_params, n_gpus, SEQ, MICRO_BATCH, "bf16", fits)
        except ValueError as exc:
            advice_rows.append([label, str(exc), "", "", ""])
            continue
        choice = a.choice()
        if choice is None:
            advice_rows.append([label, f"no strategy fits on {n_gpus} GPUs", "", "", ""])
            continue
        best, runner = choice.best, choice.runner_up
        why += [f"{label}: {line}" for line in reasons(a, choice)]  # the lines `wirecheck advise` prints, as it words them
        ratio = runner.prediction.tokens_per_s / best.prediction.tokens_per_s if runner else 1
        second = (f"{runner.strategy} on {runner.placement.klass}, "
                  + (f"{ratio - 1:.0%} faster" if ratio > 1 else f"{1 - ratio:.0%} slower")
                  + (f" ({choice.why})" if choice.why else "") if runner else "-")
        advice_rows.append([label, f"{best.strategy} on {best.placement.id}",
                            f"CUDA_VISIBLE_DEVICES={best.placement.cuda_visible_devices}",
                            f"{best.prediction.tokens_per_s:,.0f}", second])
    s.add(table(["model", f"advice on {n_gpus} GPUs (micro-batch {MICRO_BATCH} x {SEQ})", "pin", "tokens/s predicted",
                 "runner-up"], advice_rows, numeric=(3,)))
    for line in why:
        s.add(note(line))
    ranked = next((a for a in [advise(figures, 7_000_000_000, n_gpus, SEQ, MICRO_BATCH, "bf16", fits)] if a.ranked), None)
    for part in slow_parts(figures.verdicts) if ranked else []:
        s.add(note("Slow part: " + cost_line(part, "DDP", next(o.prediction for o in ranked.options
                                                               if o.strategy == "ddp" and o.prediction))))
    return s
