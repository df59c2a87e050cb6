"""The model against the node's recorded runs: predicted and measured tokens/s per strategy and wire.

Two tests, both predicting runs the fit did not see:
- `leave_one_out`: for each record, fit on the others (the overhead on NVLink, the overlap on the
  host path) and predict this record's runs from its own curves and the others' one-GPU rate;
- `nvlink_only`: fit the overhead on the NVLink runs alone, with the overlap fixed at backward's
  share of the model FLOPs (4 of 6 of forward and backward: gradients reduce while backward runs), and predict the host-path
  (forced_pcie) runs from the host-path curve: the wire changes, nothing is fitted on it.
- `other_workload`: fit on the runs of one workload (both wires, one micro-batch) and predict the
  runs of another (another micro-batch: T0 scales with the tokens, the curves are the test runs').
Error = predicted / measured tokens/s - 1.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from wirecheck.advise.figures import from_records
from wirecheck.advise.fits import SLOW_CLASSES, fit_strategies, grouped
from wirecheck.advise.model import predict
from wirecheck.advise.schedule import schedule

BACKWARD_SHARE = 4 / 6  # of the 6 model FLOPs per parameter per token, backward does 4


@dataclass(frozen=True)
class Row:
    strategy: str
    klass: str
    measured: float  # tokens/s
    predicted: float
    held_out: str  # what the prediction did not see

    @property
    def error(self) -> float:
        return self.predicted / self.measured - 1


def _predict_runs(fit_figures, test_figures, fits, classes=None) -> list[tuple]:
    out = []
    for (name, klass, n), (step, _local, run) in grouped(test_figures.runs).items():
        if name not in fits or (classes and klass not in classes):
            continue
        tokens_gpu = run.tokens_per_step / n
        c = fit_figures.compute
        p = predict(schedule(name, run.n_params, run.shape, run.precision), n,
                    lambda op, k=klass: test_figures.curve(op, k, n), c.strategy_step_s(name, run.n_params, tokens_gpu, n),
                    fits[name], tokens_gpu, c.strategy_optimizer_s(name, run.n_params, n))
        out.append((name, klass, run.tokens_per_step / step, p.tokens_per_s))
    return out


def leave_one_out(paths) -> list[Row]:
    """Per strategy and class: the median over the held-out records of measured and predicted tokens/s."""
    if len(paths) < 2:
        raise ValueError("leave-one-out needs at least two records")
    per: dict = {}
    for i, held in enumerate(paths):
        rest = [p for j, p in enumerate(paths) if j != i]
        fit_figures, test = from_records(rest), from_records([held])
        for name, klass, meas, pred in _predict_runs(fit_figures, test, fit_strategies(fit_figures, fallback={})):
            per.setdefault((name, klass), []).append((meas, pred))
    return [Row(name, klass, statistics.median(m for m, _ in v), statistics.median(p for _, p in v),
                "each record predicted from the others")
            for (name, klass), v in per.items()]


def nvlink_only(paths) -> list[Row]:
    figures = from_records(paths)
    fits = fit_strategies(figures, fallback={}, overlap=round(BACKWARD_SHARE, 2))
    return [Row(name, klass, meas, pred, "the host-path runs (overlap fixed, overhead fitted on NVLink)")
            for name, klass, meas, pred in _predict_runs(figures, figures, fits, classes=SLOW_CLASSES)]


def other_workload(fit_paths, test_paths) -> list[Row]:
    fit_figures, test = from_records(fit_paths), from_records(test_paths)
    fits = fit_strategies(fit_figures, fallback={})
    mb = sorted({r.micro_batch for r in fit_figures.runs})
    return [Row(name, klass, meas, pred, f"runs of another workload (fitted at micro-batch {'/'.join(map(str, mb))})")
            for name, klass, meas, pred in _predict_runs(fit_figures, test, fits)]


def table(rows: list[Row], title: str) -> str:
    lines = [title, f"  {'strategy':8} {'placement':12} {'measured tok/s':>15} {'predicted':>10} {'error':>7}"]
    for r in sorted(rows, key=lambda r: (r.klass, r.strategy)):
        lines.append(f"  {r.strategy:8} {r.klass:12} {r.measured:>15,.0f} {r.predicted:>10,.0f} {r.error:>+7.1%}")
    return "\n".join(lines)
