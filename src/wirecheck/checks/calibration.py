"""What the site's clean runs say each floor should be (`wirecheck calibrate`).

Each stable figure of the runs (wirecheck.records.figures) is grouped by the thresholds key that
judges it (a GPU model's figure, a fabric's host copy, a class/op/count's busbw, a strategy's or one
GPU's tokens/s); its readings give a median, a spread (scaled MAD / median) and a floor by the
`calibration` rule of thresholds.yaml. Runs that cannot be trusted are refused, never averaged in:
a failed, interrupted or cut-short run, one whose GPU failed the floor measured on its own GPU model (a slow
GPU, not a floor to make anew), a simulation, a key that mixes GPU models, too few runs, and a figure too
noisy to hold the rule (the noise the rule used named, with what would narrow it).

Each floor also states its resolution (wirecheck.checks.sensitivity, by resampling these runs): the loss it
catches in 95 % of runs and its false alarms on them, and the loss the history rule catches on the same
runs' noise run to run, so that the site knows what its floors can see before a GPU slows.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from wirecheck.core.peer_stats import relative_spread
from wirecheck.core import trend
from wirecheck.core.resolution import Resolution, prediction_factor
from wirecheck.core.verdict import source_rule
from wirecheck.checks import gpu_figures, sensitivity
from wirecheck.records.figures import Figure, GpuFigures, limit_only, run_figures
from wirecheck.records.file import RunRecord
from wirecheck.records.same_run import run_key, same_run_words
from wirecheck.thresholds.baselines import CalibrationRule

# What narrows a figure's spread, by the section its floor sits in (the settings that time it).
NARROWING = {
    "gemm": "more GEMM calls per figure (gpu_health.hardware.gemm.iters) or judge the sustained median instead",
    "hbm": "more copies per figure (gpu_health.hardware.hbm.iters)",
    "sustained": "a longer sustained load (gpu_health.hardware.sustained.duration)",
    "gpu_health": "more repetitions per figure (its check's settings under gpu_health.hardware)",
    "copy_bandwidth": "more copies per figure (copy_bandwidth.settings.iters)",
    "collectives": "more calls at the floor size (collectives.hardware.iters)",
    "latency": "more calls per size (collectives.hardware.iters, graph_replays)",
    "training": "more timed steps (training.hardware steps)",
}


class CalibrationError(ValueError):
    """Runs calibrate refuses; the message names each run or figure and the fix."""


@dataclass(frozen=True)
class Calibrated:
    key: tuple
    figure: str
    kind: str
    floor: float  # base units: the floor, or for a ceiling (bound max) the ceiling
    median: float
    lowest: float  # the reading nearest the limit: the lowest (a ceiling's: the highest)
    spread: float  # scaled MAD / median
    noise: float  # the noise the rule made the limit from (noise_of): the larger statistic, or the spread
    noise_name: str  # which statistic `noise` is ("standard deviation / mean", "scaled MAD / median")
    margin: float  # how far under the lowest reading the floor sits (over the highest, a ceiling's), a fraction
    n: int  # readings
    runs: int
    nodes: tuple
    gpus: tuple
    dates: tuple
    identified: bool  # every GPU named by serial or UUID (records written before they were kept: host and bus id)
    bound: str = "min"  # min: a floor; max: a ceiling (latency)
    unit: str | None = None  # the unit it is written in, where its declaration says it (a GPU figure); None: its kind's
    gpu_models: tuple = ()  # the GPU model(s) the readings were taken on (one: mixed models are refused)
    resolution: Resolution | None = None  # what the floor catches on these runs (None: a ceiling, not measured)
    history: Resolution | None = None  # what the history rule catches on these runs' noise (None: no rule given)
    others: dict = field(default_factory=dict)  # rule -> Resolution on these runs: the base file's floor, peers, fleet
    base_floor: float | None = None  # the base file's table floor at the same key (base units); None: it has none

    @property
    def yaml_path(self) -> str:
        return ".".join(str(k) for k in self.key)


def resolutions(figs: list[Figure], floor: float, history=None, base=None) -> tuple:
    """(the floor's resolution, the history rule's, {rule: resolution} of the base file's floors, the peers and
    the fleet) from `figs`, the readings a floor was calibrated from: each subject's (GPU's, placement's) runs
    give the noise run to run, their levels the spread between GPUs. `base`: the thresholds the site file lays
    its floors over (None: those rules are not said)."""
    by_subject: dict[str, list[Figure]] = {}
    for f in figs:
        by_subject.setdefault(f.subject, []).append(f)
    noise = sensitivity.Noise.of([[f.value for f in sorted(group, key=lambda f: f.started)]
                                  for group in by_subject.values()], [f.within for f in figs])
    floor_res = sensitivity.resolution(sensitivity.floor_losses(noise, floor), noise)
    others = sensitivity.rule_resolutions(noise, base, figs[0].yaml_path) if base is not None else {}
    if history is None or not noise.deviations:
        return floor_res, None, others
    return floor_res, sensitivity.resolution(
        sensitivity.history_losses(noise, history, history.runs, figure=figs[0].figure), noise), others


@dataclass
class Calibration:
    entries: list[Calibrated] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # keys left out and why, runs that would tighten it
    few_hosts: str | None = None  # said when the runs come from fewer hosts than the rule's min_runs


def few_hosts(runs: list[RunRecord], rule: CalibrationRule) -> str | None:
    """Why floors from runs of fewer than `min_runs` hosts are that node's figures, not the site's; None from enough.

    A node's repeated runs show its own noise, not how far its GPUs sit from another node's: on three 1x H200 nodes
    the power-limited GEMM differed by 3-4 % between GPUs, more than within one (docs/thresholds.md)."""
    hosts = sorted({str(run.run.get("host") or "?") for run in runs})
    if len(hosts) >= rule.min_runs:
        return None
    return (f"the {len(runs)} runs come from {len(hosts)} host(s) ({', '.join(hosts)}), fewer than {rule.min_runs} "
            f"({rule.yaml_path}.min_runs): these floors are {'that node' if len(hosts) == 1 else 'those nodes'}'s "
            "figures, not the site's (GPUs of one model differ by a few % between nodes), and another node may fail "
            f"them; calibrate over clean runs on {rule.min_runs} nodes or more")


def spread(values: list[float]) -> float:
    """Scaled MAD over the median: the robust relative noise of a figure (0 for one value)."""
    return relative_spread(values)


def margin_of(values: list[float], rule: CalibrationRule) -> float:
    """How far under the lowest reading (over the highest, for a ceiling) the limit sits: max(min_margin,
    the prediction bound at the rule's false-alarm rate x the readings' noise)."""
    return max(rule.min_margin, prediction_factor(len(values), rule.false_alarms) * trend.noise(values))


def noise_of(values: list[float], rule: CalibrationRule, ceiling: bool = False) -> tuple[float, str]:
    """(the noise the rule makes the limit from, which statistic it is): with `false_alarms` the larger of
    standard deviation / mean and scaled MAD / median (trend.noise), else (and for a ceiling) the spread. Said
    beside the floor so that it can be made again by hand from what is printed."""
    if ceiling or not rule.false_alarms:
        return spread(values), "scaled MAD / median"
    sd = trend.noise(values)
    mad = spread(values)
    return (mad, "scaled MAD / median") if mad >= sd else (sd, "standard deviation / mean")


def floor_of(values: list[float], rule: CalibrationRule) -> float:
    """lowest x (1 - margin_of): below every reading it was made from, and wider where the readings are
    noisy or few. A rule without `false_alarms` (a file written before it): min(lowest x (1 - min_margin),
    median x (1 - mad_k x spread))."""
    if rule.false_alarms:
        return min(values) * (1 - margin_of(values, rule))
    return min(min(values) * (1 - rule.min_margin), statistics.median(values) * (1 - rule.mad_k * spread(values)))


def ceiling_of(values: list[float], rule: CalibrationRule) -> float:
    """For a figure where lower is better (small-message latency): max(highest x (1 + min_margin), median x
    (1 + mad_k x spread)), above every reading. Latency moves 4-50 % between runs (graph replay or not, the
    protocol NCCL picks) and its ceilings catch a path that doubles it: a prediction bound on that noise would
    sit far past the doubling, so the ceiling keeps the spread rule (mad_k, 3 x without one)."""
    return max(max(values) * (1 + rule.min_margin), statistics.median(values) * (1 + (rule.mad_k or 3.0) * spread(values)))


def own_floor(v: dict, gpu: GpuFigures) -> bool:
    """A GPU figure's verdict judged by the floor measured (or calibrated) on its own GPU model, or set there by
    the site's own file: failing it says the GPU is slow, not that the floor is another model's to make anew. A
    guessed or derived floor, or another model's, is what calibration replaces. (A record written before verdicts
    kept their rule: its source says which.)"""
    if v.get("check") not in gpu.checks:
        return False
    model = (v.get("inputs") or {}).get("gpu_model")
    path = str(v.get("yaml_path") or "").rpartition(": ")[2]
    return path.startswith(f"gpu_health.floors.{model}.") and \
        (v.get("rule") or source_rule(v.get("source"))) in ("measured", "calibrated", "site")


def _figure_of(v: dict, gpu: GpuFigures) -> str:
    return gpu.checks[v["check"]](v.get("inputs") or {})


def _left_out(v: dict, gpu: GpuFigures, leave_out: tuple[str, ...]) -> bool:
    figure = _figure_of(v, gpu)
    return figure in leave_out or f"gpu_health.floors.{(v.get('inputs') or {}).get('gpu_model')}.{figure}" in leave_out


def _bound(v: dict) -> str:
    limit = v.get("limit") or {}
    which = "floor" if limit.get("min") is not None else "ceiling"
    return f"{which} {limit.get('min', limit.get('max')):.1f} {v.get('unit') or ''}".rstrip()


def run_problem(run: RunRecord, gpu: GpuFigures, leave_out: tuple[str, ...] = ()) -> str | None:
    """Why a run is no calibration run, or None (`gpu`: the declared GPU figures, gpu_figures())."""
    if run.simulated:
        return "a simulated run (CPU figures say nothing about the site's GPUs): calibrate hardware runs only"
    if run.damaged:
        return f"damaged ({run.damage()}): calibrate whole records only"
    if run.end is None:
        return "cut short (no end line): calibrate runs that completed"
    if run.end.get("status") != "complete":
        return f"{run.end.get('status')} ({run.end.get('signal') or 'not complete'}): calibrate runs that completed"
    failed = [v for v in run.verdicts if v.get("outcome") == "fail" and not limit_only(v, gpu)]
    if failed:
        first = failed[0]
        return (f"failed: {len(failed)} verdict(s) failed (first: {first.get('check')} on {first.get('where') or 'the node'}): "
                "calibrate only clean runs on nodes the site trusts")
    slow = [v for v in run.verdicts if v.get("outcome") == "fail" and own_floor(v, gpu) and not _left_out(v, gpu, leave_out)]
    if slow:  # a floor measured on this GPU model that these runs fail would be loosened to their slow GPU
        return "not clean: " + "; ".join(
            f"{v.get('check')} on {v.get('where') or 'the node'} measured {v.get('measured'):.1f} {v.get('unit') or ''}, "
            f"under the {_bound(v)} measured on {(v.get('inputs') or {}).get('gpu_model')} ({v.get('yaml_path')})"
            for v in slow) + (": a GPU under its own model's floor is slow, and floors from it would pass the next slow "
                              "one; calibrate from runs on nodes you trust, or leave the figure out (--leave-out "
                              f"{', --leave-out '.join(sorted({_figure_of(v, gpu) for v in slow}))}: the base file's "
                              "floor stays)")
    if run.end.get("exit_status") not in (0, 1, None):  # 1: the limits calibrate replaces failed, nothing else
        return f"exited {run.end.get('exit_status')}: calibrate only clean runs"
    return None


def limit_failures(run: RunRecord, gpu: GpuFigures) -> list[str]:
    """The calibrated figures a run failed only by their table limit, said so (their limits are made anew); a
    floor of its own GPU model that it failed was left out (run_problem refuses it otherwise), and stays."""
    return [f"{run.path}: {v.get('check')} on {v.get('where') or 'the node'}: {v.get('measured'):.1f} "
            f"{v.get('unit') or ''} failed the {_bound(v)} of {v.get('yaml_path')}: "
            + ("measured on this GPU model; left out (--leave-out), that floor stays" if own_floor(v, gpu)
               else "its limit is calibrated anew from these runs")
            for v in run.verdicts if v.get("outcome") == "fail" and limit_only(v, gpu)]


def _more_runs(values: list[float], rule: CalibrationRule, ceiling: bool) -> str:
    """What more runs would do where few widen the bound (the prediction bound of 3 runs is 2.7 times that of 10)."""
    if ceiling or not rule.false_alarms or len(values) >= rule.tight_runs:
        return ""
    then = max(rule.min_margin, prediction_factor(rule.tight_runs, rule.false_alarms) * trend.noise(values))
    return f", or give {rule.tight_runs} runs or more (with {len(values)} the margin widens; with {rule.tight_runs} " \
           f"as noisy it would be {then * 100:.1f} % under the lowest)"


def _settled(values: list[float], rule: CalibrationRule, ceiling: bool) -> str:
    """What the margin is from these readings and would be from tight_runs as noisy (a prediction bound's factor
    shrinks with the readings: 8.0 x the noise from 3, 3.0 x from 10)."""
    if ceiling or not rule.false_alarms:
        return ""
    n, tight = len(values), max(rule.tight_runs, len(values))
    now, then = (prediction_factor(k, rule.false_alarms) for k in (n, tight))
    return (f": the margin under the lowest is max(min_margin {rule.min_margin * 100:g} %, {now:.2f} x the noise) from "
            f"{n} readings, max({rule.min_margin * 100:g} %, {then:.2f} x) from {tight}")


def _narrowing(key: tuple, figure: str) -> str:
    if key[:2] == ("collectives", "latency"):
        return NARROWING["latency"]
    if key[0] == "gpu_health":
        return NARROWING[next((k for k in ("gemm", "hbm", "sustained") if figure.startswith(k)), "gpu_health")]
    return NARROWING[key[0]]


def _base_floor(base, path: str) -> float | None:
    """The base file's own table floor at `path` (not one derived from a GPU's peaks), base units."""
    found = sensitivity.shipped_floors(base, path)
    return found.get("measured")


def calibrate(runs: list[RunRecord], rule: CalibrationRule, leave_out: tuple[str, ...] = (),
              workload: dict | None = None, history=None, base=None) -> Calibration:
    """Floors from `runs`; CalibrationError listing every refused run and figure. `workload`: what the
    base file's training limits are for (TrainingSettings.workload()); training figures of another
    workload are left out, as judge skips them. `history`: the history rule (thresholds' HistoryRule) whose
    resolution on these runs each entry states beside its floor's (None: the floor's alone); `base`: the
    thresholds it lays its floors over, whose table floor, peer and fleet rules' resolutions it states too."""
    gpu = gpu_figures()  # which verdicts hold a GPU figure, and its kind and unit: as the checks declare them
    problems = [f"{run.path}: {why}" for run in runs if (why := run_problem(run, gpu, leave_out))]
    seen: dict[tuple, RunRecord] = {}
    for run in runs:  # one run given twice would count its noise twice and narrow the floor on nothing
        same = seen.setdefault(run_key(run.run), run)
        if same is not run:
            problems.append(f"{run.path}: the same run as {same.path} ({same_run_words(run.run)}): each run counts "
                            "once; give different runs")
    if problems:
        raise CalibrationError("\n".join(problems))
    if len(runs) < rule.min_runs:
        raise CalibrationError(f"{len(runs)} run(s) given; calibrate needs at least {rule.min_runs} clean runs "
                               f"({rule.yaml_path}.min_runs), {rule.tight_runs} to settle each figure's spread")
    by_key: dict[tuple, list[Figure]] = {}
    out = Calibration(few_hosts=few_hosts(runs, rule))
    for run in runs:
        out.notes += limit_failures(run, gpu)
        for fig in run_figures(run, gpu):
            by_key.setdefault(fig.key, []).append(fig)
    named = {figs[0].figure for figs in by_key.values()} | {".".join(str(k) for k in key) for key in by_key}
    unknown = [given for given in leave_out if given not in named]
    if unknown:  # a typo would calibrate the very figure it meant to leave out
        figures = ", ".join(sorted({figs[0].figure for figs in by_key.values()}))
        raise CalibrationError(f"--leave-out {', '.join(unknown)}: no figure or key path of these runs; their "
                               f"figures: {figures} (or a key path, as the output file writes it)")
    for key, figs in sorted(by_key.items(), key=lambda kv: [str(k) for k in kv[0]]):
        path = ".".join(str(k) for k in key)
        figure = figs[0].figure
        if figure in leave_out or path in leave_out:
            out.notes.append(f"{path}: left out (--leave-out): the base file's entry stays")
            continue
        models = sorted({m for f in figs for m in f.gpu_models})
        if len(models) > 1:
            where = "; ".join(f"{m} in {', '.join(sorted({f.record for f in figs if m in f.gpu_models}))}" for m in models)
            problems.append(f"{path}: mixed GPU models under one key ({where}): calibrate each model's runs into its "
                            "own file")
            continue
        other = [f for f in figs if workload and f.workload and f.workload != workload]
        if other:
            diffs = "; ".join(f"{k} {other[0].workload.get(k)!r} (base: {v!r})" for k, v in workload.items()
                              if other[0].workload.get(k) != v)
            out.notes.append(f"{path}: measured on another workload than the base file's training.hardware ({diffs}) in "
                             f"{other[0].record}: left out, the base file's entry stays")
            continue
        records = sorted({f.record for f in figs})
        if len(records) < rule.min_runs:
            out.notes.append(f"{path}: in {len(records)} of the runs only (at least {rule.min_runs} needed): left out, "
                             "the base file's entry stays")
            continue
        values = [f.value for f in figs]
        ceiling = figs[0].bound == "max"
        median = statistics.median(values)
        noise, noise_name = noise_of(values, rule, ceiling)
        floor = ceiling_of(values, rule) if ceiling else floor_of(values, rule)
        off = floor / median - 1 if ceiling else 1 - floor / median
        allowed, key_name = ((rule.max_above_median, "max_above_median") if ceiling
                             else (rule.max_below_median, "max_below_median"))
        if off > allowed:
            edge = (f"highest {figs[0].shown(max(values))}" if ceiling else f"lowest {figs[0].shown(min(values))}")
            problems.append(
                f"{path}: noise {noise * 100:.1f} % ({noise_name}) over {len(values)} readings in {len(records)} runs ({edge}, "
                f"median {figs[0].shown(median)}): the {'ceiling' if ceiling else 'floor'} these runs allow, "
                f"{figs[0].shown(floor)}, is {off * 100:.1f} % {'above' if ceiling else 'below'} the median, wider "
                f"than the {allowed * 100:g} % rule ({rule.yaml_path}.{key_name}) can hold; "
                f"narrow it with {_narrowing(key, figure)}{_more_runs(values, rule, ceiling)}, or leave it out with "
                f"--leave-out {figure if key[0] in ('gpu_health', 'copy_bandwidth') else path}")
            continue
        if len(records) < rule.tight_runs:
            out.notes.append(f"{path}: {len(records)} runs; {rule.tight_runs - len(records)} more would settle its "
                             f"noise ({noise * 100:.2f} % now, {noise_name}; {rule.yaml_path}.tight_runs)"
                             f"{_settled(values, rule, ceiling)}")
        judged_by_history = history is not None and figure in history.figures
        floor_res, history_res, others = (resolutions(figs, floor, history if judged_by_history else None, base)
                                          if not ceiling else (None, None, {}))
        out.entries.append(Calibrated(
            key=key, figure=figure, kind=figs[0].kind, floor=floor, median=median, lowest=max(values) if ceiling else min(values),
            spread=spread(values), noise=noise, noise_name=noise_name,
            margin=floor / max(values) - 1 if ceiling else 1 - floor / min(values),
            base_floor=None if ceiling or base is None else _base_floor(base, path),
            n=len(values), runs=len(records), nodes=tuple(sorted({f.host for f in figs})),
            gpus=tuple(sorted({g for f in figs for g in f.gpus})), dates=tuple(sorted({f.started[:10] for f in figs})),
            identified=all(f.identified for f in figs), bound=figs[0].bound, unit=figs[0].unit, gpu_models=tuple(models),
            resolution=floor_res, history=history_res, others=others))
    if problems:
        raise CalibrationError("\n".join(problems))
    return out
