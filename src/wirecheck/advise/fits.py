"""Each strategy's overhead and overlap fitted on the node's own strategy runs (model.py says what they are).

The runs are grouped by strategy and placement class (median step and local step over repeated
runs). The overhead comes from the fast-wire class (NVLink: nvswitch, nvl_*), the overlap from a
slow-wire class of the same GPU count (forced_pcie, pcie, cross_quad) together with it. A strategy
without a slow-wire run keeps the shipped overlap; without a fast-wire run, the shipped overhead
too (profiles.yaml `defaults.fits`, fitted on 2x H200 SXM and said so).
"""

from __future__ import annotations

import statistics

from wirecheck.advise.figures import PROFILES_FILE, FiguresError, load_profiles
from wirecheck.advise.model import Fit, comm_times, fit_overhead, fit_overlap
from wirecheck.advise.schedule import schedule
from wirecheck.node.placement import CLASS_CROSS_QUAD, CLASS_FORCED_PCIE, CLASS_PCIE, NVLINK_CLASSES
from wirecheck.vocab.strategies import NAMES

SLOW_CLASSES = (CLASS_FORCED_PCIE, CLASS_PCIE, CLASS_CROSS_QUAD)


MS_PER_GB = 1e-3 / 1e9  # profiles.yaml writes the overhead in ms per GB of collective buffers; the model, s per byte


def shipped_fits(path=PROFILES_FILE) -> dict[str, Fit]:
    data = (load_profiles(path).get("defaults") or {}).get("fits") or {}
    source = data.get("source", "")
    try:
        return {name: Fit(float(v["overhead_ms_per_gb"]) * MS_PER_GB, float(v["overlap"]), f"shipped: {source}")
                for name, v in data.items() if name in NAMES}
    except (KeyError, TypeError, ValueError) as exc:
        raise FiguresError(f"{path}: defaults.fits: each strategy needs overhead_ms_per_gb and overlap ({exc!r}); "
                           "write e.g. ddp: {overhead_ms_per_gb: 2.8, overlap: 0.71}") from None


def grouped(runs) -> dict:
    """(strategy, class, n) -> (median step, median local, a run of the group for its model)."""
    groups: dict = {}
    for r in runs:
        groups.setdefault((r.strategy, r.klass, r.n_gpus), []).append(r)
    return {k: (statistics.median(r.step_s for r in v), statistics.median(r.local_s for r in v), v[0])
            for k, v in groups.items()}


def _timed(figures, run, klass: str):
    collectives = schedule(run.strategy, run.n_params, run.shape, run.precision)
    return comm_times(collectives, run.n_gpus, lambda op: figures.curve(op, klass, run.n_gpus))


def _compute_of(figures, run, local_s: float) -> float:
    """The run's compute: its local step (the unwrapped model with the optimizer over every parameter) less the
    optimizer share its strategy shards (figures.Compute.sharded_saving_s)."""
    if figures.compute is None:
        return local_s
    return local_s - figures.compute.sharded_saving_s(run.strategy, run.n_params, run.n_gpus)


def _optimizer_of(figures, run) -> float:
    """The optimizer step inside the run's compute (no collective hides under it)."""
    if figures.compute is None:
        return 0.0
    return figures.compute.strategy_optimizer_s(run.strategy, run.n_params, run.n_gpus)


def fit_strategies(figures, fallback: dict[str, Fit] | None = None, overlap: float | None = None) -> dict[str, Fit]:
    """Per strategy: the fit on the node's runs, else `fallback`'s (shipped). `overlap` given: used for
    every strategy instead of fitting it (the NVLink-only validation)."""
    fallback = shipped_fits() if fallback is None else fallback
    groups = grouped(figures.runs)
    out = {}
    for name in NAMES:
        fast = [(k, v) for k, v in groups.items() if k[0] == name and k[1] in NVLINK_CLASSES]
        if not fast:
            if name in fallback:
                out[name] = fallback[name]
            continue
        (_, fklass, n), (fstep, flocal, frun) = fast[0]
        fast_args = (fstep, _compute_of(figures, frun, flocal), _timed(figures, frun, fklass), _optimizer_of(figures, frun))
        slow = [(k, v) for k, v in groups.items() if k[0] == name and k[1] in SLOW_CLASSES and k[2] == n]
        if overlap is not None:
            h, how = overlap, f"overlap {overlap:.2f} given"
        elif slow:
            (_, sklass, _), (sstep, slocal, srun) = slow[0]
            h = fit_overlap(fast_args, (sstep, _compute_of(figures, srun, slocal), _timed(figures, srun, sklass),
                                        _optimizer_of(figures, srun)))
            how = f"overlap fitted on {sklass}"
        elif name in fallback:
            h, how = fallback[name].overlap, "overlap shipped (no slow-wire run)"
        else:
            continue
        fstep_s, flocal_s, ftimed, fopt_s = fast_args
        out[name] = Fit(fit_overhead(fstep_s, flocal_s, ftimed, h, fopt_s), h, f"fitted on the node's runs: overhead on {fklass}, {how}")
    return out
