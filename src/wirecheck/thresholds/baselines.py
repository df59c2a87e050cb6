"""The `calibration` and `history` sections of thresholds.yaml: how `wirecheck calibrate` makes a
floor from the site's clean runs, and how a figure is held against its own GPU's or placement's
last runs (checks/history.py).

Both rules read a figure's noise from the runs themselves (wirecheck.core.peer_stats' scaled MAD,
relative to the median), so a steady figure gets a tight limit and a noisy one a wide one, and
both refuse to pretend: a figure whose noise is wider than `max_below_median` cannot hold that
rule and is said so, never passed. The sections are optional so that thresholds files recorded
before they existed still load; a command that needs one says which is missing.
"""

from __future__ import annotations

from dataclasses import dataclass

from wirecheck.thresholds import declared
from wirecheck.vocab import ops, strategies
from wirecheck.thresholds.yaml_reader import SOURCE_HINT, ThresholdsError, _At

# The short names a history figures list may hold (as wirecheck.records.figures names them): the GPU figures,
# host copies, a collective op (busbw at the floor size), a strategy, one GPU alone.
# (The GPU figures are those the checks declare floors for: read when a file is, after they registered.)
# Read from the vocabulary: a new collective or strategy row is a history figure with no edit here.
OTHER_HISTORY_FIGURES = ("h2d", "d2h") + ops.OPS + strategies.NAMES + ("single_gpu_throughput",)


def history_figures() -> tuple[str, ...]:
    return tuple(declared.floors()) + OTHER_HISTORY_FIGURES


@dataclass(frozen=True)
class CalibrationRule:
    """floor = lowest x (1 - max(min_margin, factor x noise)): noise the readings' own (the larger of their
    scaled MAD / median and standard deviation / mean), factor the one-sided prediction bound at
    `false_alarms` for that many readings (few readings, a wider margin); refused when that floor lies
    more than max_below_median under the median. A file written before the bound (no `false_alarms`)
    keeps its rule: min(lowest x (1 - min_margin), median x (1 - mad_k x spread)). A ceiling (latency)
    mirrors it and is refused more than max_above_median above."""

    min_runs: int
    tight_runs: int  # runs after which more runs move the spread little (said when fewer were given)
    mad_k: float | None
    min_margin: float
    max_below_median: float
    max_above_median: float
    source: str
    yaml_path: str
    false_alarms: float | None = None


@dataclass(frozen=True)
class DriftRule:
    """The drift rule over each GPU's and placement's last `runs` (wirecheck.checks.drift): Page's CUSUM
    of its shortfall against the median of the oldest `baseline` runs, in units of their noise (at least
    `min_noise`), less `k`; past `h` the series fell. It warns from max(`warn_at`, `noise_k` x noise) below
    that reference and fails from max(`fail_at`, `noise_k` x noise), naming the run where the fall began,
    once the fall has lasted `min_after` runs (one low run is the history rule's).
    Fewer than `baseline` + `min_after` runs: said, not judged; a noise whose `noise_k` multiple is wider
    than history.max_margin: said too noisy, not judged."""

    runs: int
    baseline: int
    min_after: int
    k: float
    h: float
    min_noise: float
    noise_k: float
    warn_at: float
    fail_at: float
    source: str
    yaml_path: str

    def bounds(self, noise: float) -> tuple[float, float]:
        """(the loss it warns from, the loss it fails from) for a series of this relative noise."""
        return max(self.warn_at, self.noise_k * noise), max(self.fail_at, self.noise_k * noise)


@dataclass(frozen=True)
class HistoryRule:
    """A figure fails below median(last `runs`) x (1 - margin), margin = max(min_margin, factor x noise),
    where `noise` is what the runs themselves measured (run to run: their standard deviation and scaled
    MAD; within a run: its repeats' standard error) and `factor` the one-sided prediction bound at
    `false_alarms` for that many runs (Student's t: few runs, a wider bound). A file written before the
    bound (no `false_alarms`) keeps its rule: factor `mad_k`, noise the scaled MAD. Fewer than `min_runs`
    earlier runs: said, not judged; a margin wider than max_margin: said, not judged."""

    runs: int  # K: the last runs compared with
    min_runs: int
    mad_k: float | None
    min_margin: float
    max_margin: float
    figures: tuple[str, ...]
    source: str
    yaml_path: str
    false_alarms: float | None = None  # the share of clean runs the bound may fail (its one-sided level)
    drift: DriftRule | None = None  # the trend rule over the same figures (None: a file older than it)
    # figure -> its own least margin, over min_margin: a figure whose recorded noise has a tail the few runs of
    # one history cannot show (host copies: one run in twelve 4 % low) keeps its false alarms under the rate
    min_margins: tuple = ()

    def least_margin(self, figure: str | None) -> float:
        return max([self.min_margin] + [m for name, m in self.min_margins if name == figure])


def _fraction(at: _At, example: str) -> float:
    value = at.quantity("percent")
    if not 0 <= value < 1:
        raise at.error("must be at least 0 % and below 100 %", f"write e.g. {example}")
    return value


def _false_alarms(f: dict) -> float | None:
    if "false_alarms" not in f:
        return None
    value = _fraction(f["false_alarms"], '"1 %"')
    if not 0 < value < 0.5:
        raise f["false_alarms"].error("must lie above 0 % and below 50 %", 'write e.g. "1 %"')
    return value


def parse_calibration(at: _At) -> CalibrationRule:
    f = at.fields("calibration rule", required={
        "min_runs": "3", "tight_runs": "10", "min_margin": '"1 %"', "max_below_median": '"10 %"',
        "max_above_median": '"50 %"', "source": SOURCE_HINT}, optional={"false_alarms": '"1 %"', "mad_k": '"3 x"'})
    if "false_alarms" not in f and "mad_k" not in f:
        raise at.error("has neither false_alarms nor mad_k", 'add false_alarms: "1 %" (the margin from the readings\' '
                                                              'own noise at that false-alarm rate)')
    min_runs = f["min_runs"].count(minimum=3)  # a median and a spread need three values at least
    return CalibrationRule(min_runs, f["tight_runs"].count(minimum=min_runs),
                           f["mad_k"].quantity("ratio") if "mad_k" in f else None,
                           _fraction(f["min_margin"], '"1 %"'), _fraction(f["max_below_median"], '"10 %"'),
                           f["max_above_median"].quantity("percent", positive=True), f["source"].source(), at.cite,
                           _false_alarms(f))


def parse_drift(at: _At) -> DriftRule:
    f = at.fields("drift rule", required={
        "runs": "30", "baseline": "8", "min_after": "3", "k": '"0.5 x"', "h": '"5 x"', "min_noise": '"0.1 %"',
        "noise_k": '"3 x"', "warn_at": '"1 %"', "fail_at": '"3 %"', "source": SOURCE_HINT})
    baseline = f["baseline"].count(minimum=3)  # a median and a spread need three runs
    min_after = f["min_after"].count(minimum=1)
    runs = f["runs"].count(minimum=baseline + min_after)
    warn_at, fail_at = _fraction(f["warn_at"], '"1 %"'), _fraction(f["fail_at"], '"3 %"')
    if warn_at > fail_at:
        raise f["warn_at"].error("is above fail_at", "warn at a smaller loss than the one that fails")
    return DriftRule(runs, baseline, min_after, f["k"].quantity("ratio"), f["h"].quantity("ratio", positive=True),
                     _fraction(f["min_noise"], '"0.1 %"'), f["noise_k"].quantity("ratio", positive=True), warn_at,
                     fail_at, f["source"].source(), at.cite)


def parse_history(at: _At) -> HistoryRule:
    f = at.fields("history rule", required={
        "runs": "10", "min_runs": "3", "min_margin": '"0.5 %"', "max_margin": '"10 %"',
        "figures": "[hbm_copy, hbm_read, sustained_bf16, gemm_fp8, h2d, d2h, all_reduce, ddp, single_gpu_throughput]",
        "source": SOURCE_HINT}, optional={"false_alarms": '"1 %"', "mad_k": '"3 x"', "min_margins": '{h2d: "4 %"}',
                                          "drift": '{runs: 30, baseline: 8, min_after: 3, k: "0.5 x", h: "5 x", ...}'})
    if "false_alarms" not in f and "mad_k" not in f:
        raise at.error("has neither false_alarms nor mad_k", 'add false_alarms: "1 %" (the bound from the runs\' '
                                                              'own noise at that false-alarm rate)')
    min_runs = f["min_runs"].count(minimum=3)
    runs = f["runs"].count(minimum=min_runs)
    names = f["figures"].value
    if not isinstance(names, list) or not names:
        raise f["figures"].error("expected a list of figure names", f"write e.g. [hbm_copy, sustained_bf16]; known: "
                                                                     f"{', '.join(history_figures())}")
    for i, name in enumerate(names):
        _At(f["figures"].file, f["figures"].path[:-1] + (f"figures[{i}]",), name, f["figures"].line).choice(
            history_figures())
    low, high = _fraction(f["min_margin"], '"0.5 %"'), _fraction(f["max_margin"], '"10 %"')
    if low > high:
        raise f["min_margin"].error("is above max_margin", "no figure could be judged; lower min_margin")
    false_alarms = _false_alarms(f)
    margins: list = []
    if "min_margins" in f:
        f["min_margins"].mapping("figure -> its least margin", allow_empty=False)
        for name in f["min_margins"].value:
            at_name = f["min_margins"].child(name)
            if name not in history_figures():
                raise at_name.error(f"{name!r} is no figure the history rule knows",
                                    f"give a least margin to one of: {', '.join(history_figures())}")
            value = _fraction(at_name, '"4 %"')
            if value > high:
                raise at_name.error("is above max_margin", "that figure could never be judged; lower it")
            margins.append((str(name), value))
    return HistoryRule(runs, min_runs, f["mad_k"].quantity("ratio") if "mad_k" in f else None, low, high,
                       tuple(names), f["source"].source(), at.cite, false_alarms,
                       parse_drift(f["drift"]) if "drift" in f else None, tuple(margins))


def missing(path, section: str) -> ThresholdsError:
    return ThresholdsError(f"{path}: has no `{section}:` section (a file older than that rule); copy it from the "
                           "thresholds.yaml shipped with wirecheck, or start the file with `extends: wirecheck`")
