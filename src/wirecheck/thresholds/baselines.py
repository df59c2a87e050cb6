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
from wirecheck.thresholds.fields import Call, Count, Items, Nested, Qty, Raw, Source, Word, spec
from wirecheck.thresholds.yaml_reader import _At
from wirecheck.vocab import ops, strategies

# The short names a history figures list may hold (as wirecheck.records.figures names them): the GPU figures,
# host copies, a collective op (busbw at the floor size), a strategy, one GPU alone.
# (The GPU figures are those the checks declare floors for: read when a file is, after they registered.)
# Read from the vocabulary: a new collective or strategy row is a history figure with no edit here.
OTHER_HISTORY_FIGURES = ("h2d", "d2h") + ops.OPS + strategies.NAMES + ("single_gpu_throughput",)


def history_figures() -> tuple[str, ...]:
    return tuple(declared.floors()) + OTHER_HISTORY_FIGURES



def _margin(example: str) -> Qty:
    return Qty(example, "percent", below=(1.0, False, "must be at least 0 % and below 100 %", "write e.g. {example}"))


def _false_alarms(at: _At) -> float:
    """The share of clean runs a bound may fail (its one-sided level): above 0 % and below 50 %."""
    value = _margin('"1 %"')(at)
    if not 0 < value < 0.5:
        raise at.error("must lie above 0 % and below 50 %", 'write e.g. "1 %"')
    return value


FALSE_ALARMS = Call('"1 %"', _false_alarms)


def _either(v: dict, at: _At, what: str) -> None:
    """A rule from the readings' own noise (false_alarms) or, in a file written before it, from mad_k."""
    if v.get("false_alarms") is None and v.get("mad_k") is None:
        raise at.error("has neither false_alarms nor mad_k", f'add false_alarms: "1 %" (the {what} own noise at that '
                                                              "false-alarm rate)")


@dataclass(frozen=True)
class CalibrationRule:
    """floor = lowest x (1 - max(min_margin, factor x noise)): noise the readings' own (the larger of their
    scaled MAD / median and standard deviation / mean), factor the one-sided prediction bound at
    `false_alarms` for that many readings (few readings, a wider margin); refused when that floor lies
    more than max_below_median under the median. A file written before the bound (no `false_alarms`)
    keeps its rule: min(lowest x (1 - min_margin), median x (1 - mad_k x spread)). A ceiling (latency)
    mirrors it and is refused more than max_above_median above."""

    WHAT = "calibration rule"
    min_runs: int = spec(Count(minimum=3), "3")  # a median and a spread need three values at least
    tight_runs: int = spec(Raw("10"))  # runs after which more runs move the spread little (said when fewer were given)
    min_margin: float = spec(_margin('"1 %"'))
    max_below_median: float = spec(_margin('"10 %"'))
    max_above_median: float = spec(Qty('"50 %"', "percent", positive=True))
    source: str = spec(Source())
    yaml_path: str
    false_alarms: float | None = spec(FALSE_ALARMS, default=None)
    mad_k: float | None = spec(Qty('"3 x"', "ratio"), default=None)

    @classmethod
    def check(cls, v: dict, f: dict, at: _At) -> dict:
        _either(v, at, "readings'")
        v["tight_runs"] = f["tight_runs"].count(minimum=v["min_runs"])
        return v


@dataclass(frozen=True)
class DriftRule:
    """The drift rule over each GPU's and placement's last `runs` (wirecheck.checks.drift): Page's CUSUM
    of its shortfall against the median of the oldest `baseline` runs, in units of their noise (at least
    `min_noise`), less `k`; past `h` the series fell. It warns from max(`warn_at`, `noise_k` x noise) below
    that reference and fails from max(`fail_at`, `noise_k` x noise), naming the run where the fall began,
    once the fall has lasted `min_after` runs (one low run is the history rule's).
    Fewer than `baseline` + `min_after` runs: said, not judged; a noise whose `noise_k` multiple is wider
    than history.max_margin: said too noisy, not judged."""

    WHAT = "drift rule"
    runs: int = spec(Raw("30"))
    baseline: int = spec(Count(minimum=3), "8")  # a median and a spread need three runs
    min_after: int = spec(Count(minimum=1), "3")
    k: float = spec(Qty('"0.5 x"', "ratio"))
    h: float = spec(Qty('"5 x"', "ratio", positive=True))
    min_noise: float = spec(_margin('"0.1 %"'))
    noise_k: float = spec(Qty('"3 x"', "ratio", positive=True))
    warn_at: float = spec(_margin('"1 %"'))
    fail_at: float = spec(_margin('"3 %"'))
    source: str = spec(Source())
    yaml_path: str

    @classmethod
    def check(cls, v: dict, f: dict, at: _At) -> dict:
        v["runs"] = f["runs"].count(minimum=v["baseline"] + v["min_after"])
        if v["warn_at"] > v["fail_at"]:
            raise f["warn_at"].error("is above fail_at", "warn at a smaller loss than the one that fails")
        return v

    def bounds(self, noise: float) -> tuple[float, float]:
        """(the loss it warns from, the loss it fails from) for a series of this relative noise."""
        return max(self.warn_at, self.noise_k * noise), max(self.fail_at, self.noise_k * noise)


def _min_margins(at: _At) -> tuple:
    """figure -> its own least margin: ((figure, margin), ...), each a figure the history rule knows."""
    at.mapping("figure -> its least margin", allow_empty=False)
    margins = []
    for name in at.value:
        at_name = at.child(name)
        if name not in history_figures():
            raise at_name.error(f"{name!r} is no figure the history rule knows",
                                f"give a least margin to one of: {', '.join(history_figures())}")
        margins.append((str(name), at_name, _margin('"4 %"')(at_name)))
    return tuple(margins)


@dataclass(frozen=True)
class HistoryRule:
    """A figure fails below median(last `runs`) x (1 - margin), margin = max(min_margin, factor x noise),
    where `noise` is what the runs themselves measured (run to run: their standard deviation and scaled
    MAD; within a run: its repeats' standard error) and `factor` the one-sided prediction bound at
    `false_alarms` for that many runs (Student's t: few runs, a wider bound). A file written before the
    bound (no `false_alarms`) keeps its rule: factor `mad_k`, noise the scaled MAD. Fewer than `min_runs`
    earlier runs: said, not judged; a margin wider than max_margin: said, not judged."""

    WHAT = "history rule"
    runs: int = spec(Raw("10"))  # K: the last runs compared with
    min_runs: int = spec(Count(minimum=3), "3")
    min_margin: float = spec(_margin('"0.5 %"'))
    max_margin: float = spec(_margin('"10 %"'))
    figures: tuple[str, ...] = spec(Items(
        "[hbm_copy, hbm_read, sustained_bf16, gemm_fp8, h2d, d2h, all_reduce, ddp, single_gpu_throughput]",
        Word(words=lambda: history_figures()), "expected a list of figure names",
        lambda: f"write e.g. [hbm_copy, sustained_bf16]; known: {', '.join(history_figures())}", non_empty=True))
    source: str = spec(Source())
    yaml_path: str
    false_alarms: float | None = spec(FALSE_ALARMS, default=None)  # the share of clean runs the bound may fail
    mad_k: float | None = spec(Qty('"3 x"', "ratio"), default=None)
    # figure -> its own least margin, over min_margin: a figure whose recorded noise has a tail the few runs of
    # one history cannot show (host copies: one run in twelve 4 % low) keeps its false alarms under the rate
    min_margins: tuple = spec(Call('{h2d: "4 %"}', _min_margins), default=())
    drift: DriftRule | None = spec(Nested('{runs: 30, baseline: 8, min_after: 3, k: "0.5 x", h: "5 x", ...}', DriftRule),
                                   default=None)  # the trend rule over the same figures (None: a file older than it)

    @classmethod
    def check(cls, v: dict, f: dict, at: _At) -> dict:
        _either(v, at, "runs'")
        v["runs"] = f["runs"].count(minimum=v["min_runs"])
        if v["min_margin"] > v["max_margin"]:
            raise f["min_margin"].error("is above max_margin", "no figure could be judged; lower min_margin")
        if "min_margins" in v:
            for _, at_name, value in v["min_margins"]:
                if value > v["max_margin"]:
                    raise at_name.error("is above max_margin", "that figure could never be judged; lower it")
            v["min_margins"] = tuple((name, value) for name, _, value in v["min_margins"])
        return v

    def least_margin(self, figure: str | None) -> float:
        return max([self.min_margin] + [m for name, m in self.min_margins if name == figure])
