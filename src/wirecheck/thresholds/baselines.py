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
from wirecheck.thresholds.fields import Count, Items, Qty, Raw, Source, Word, spec
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


@dataclass(frozen=True)
class CalibrationRule:
    """floor = min(lowest x (1 - min_margin), median x (1 - mad_k x spread)), spread = scaled MAD /
    median; refused when that floor lies more than max_below_median under the median. A ceiling
    (latency) mirrors it and is refused more than max_above_median above."""

    WHAT = "calibration rule"
    min_runs: int = spec(Count(minimum=3), "3")  # a median and a spread need three values at least
    tight_runs: int = spec(Raw("10"))  # runs after which more runs move the spread little (said when fewer were given)
    mad_k: float = spec(Qty('"3 x"', "ratio"))
    min_margin: float = spec(_margin('"3 %"'))
    max_below_median: float = spec(_margin('"10 %"'))
    max_above_median: float = spec(Qty('"50 %"', "percent", positive=True))
    source: str = spec(Source())
    yaml_path: str

    @classmethod
    def check(cls, v: dict, f: dict, at: _At) -> dict:
        v["tight_runs"] = f["tight_runs"].count(minimum=v["min_runs"])
        return v


@dataclass(frozen=True)
class HistoryRule:
    """A figure fails below median(last `runs`) x (1 - max(min_margin, mad_k x spread)); fewer than
    `min_runs` earlier runs: said, not judged; a noise wider than max_margin: said, not judged."""

    WHAT = "history rule"
    runs: int = spec(Raw("10"))  # K: the last runs compared with
    min_runs: int = spec(Count(minimum=3), "3")
    mad_k: float = spec(Qty('"3 x"', "ratio"))
    min_margin: float = spec(_margin('"3 %"'))
    max_margin: float = spec(_margin('"10 %"'))
    figures: tuple[str, ...] = spec(Items(
        "[hbm_copy, hbm_read, sustained_bf16, gemm_fp8, h2d, d2h, all_reduce, ddp, single_gpu_throughput]",
        Word(words=lambda: history_figures()), "expected a list of figure names",
        lambda: f"write e.g. [hbm_copy, sustained_bf16]; known: {', '.join(history_figures())}", non_empty=True))
    source: str = spec(Source())
    yaml_path: str

    @classmethod
    def check(cls, v: dict, f: dict, at: _At) -> dict:
        v["runs"] = f["runs"].count(minimum=v["min_runs"])
        if v["min_margin"] > v["max_margin"]:
            raise f["min_margin"].error("is above max_margin", "no figure could be judged; lower min_margin")
        return v
