"""Each slow part of a node's records priced on a strategy's training step: what the fleet report and
`wirecheck.advise` users read ("GPU3 at -12 % ... costs every DDP step on this node about 14 %").

Apart from `slow_part` (what a slow part is and what it costs a given step) because it needs the advice
itself (the node's best placement for the strategy), which reads `slow_part`: one direction, no circle.
"""

from __future__ import annotations

from wirecheck.advise.advice import advise
from wirecheck.advise.figures import from_records
from wirecheck.advise.fits import fit_strategies
from wirecheck.advise.slow_part import cost_line, slow_parts


def slow_part_costs(record_paths, strategy: str = "ddp") -> list[str]:
    """For the fleet report and others: each slow part of the records, priced on `strategy`'s step of
    the node's own training workload (the recorded model and micro-batch) on its fastest placement of
    all the node's GPUs. Empty when the records name no slow part or hold no training runs."""
    figures = from_records(record_paths)
    parts = slow_parts(figures.verdicts)
    runs = [r for r in figures.runs if r.strategy == strategy] or figures.runs
    if not parts or not runs or figures.compute is None:
        return []
    run = runs[0]
    a = advise(figures, run.n_params, figures.gpu_count, run.shape["seq_len"], run.micro_batch, run.precision,
               fit_strategies(figures))
    options = [o for o in a.options if o.strategy == strategy and o.prediction and o.user_choice]
    if not options:
        return []
    best = max(options, key=lambda o: o.prediction.tokens_per_s)
    return [cost_line(part, strategy.upper() if strategy == "ddp" else strategy, best.prediction) for part in parts]
