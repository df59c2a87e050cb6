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
from wirecheck.thresholds.yaml_reader import SOURCE_HINT, _At

# The short names a history figures list may hold (as wirecheck.records.figures names them): the GPU figures,
# host copies, a collective op (busbw at the floor size), a strategy, one GPU alone.
# (The GPU figures are those the checks declare floors for: read when a file is, after they registered.)
# Read from the vocabulary: a new collective or strategy row is a history figure with no edit here.
OTHER_HISTORY_FIGURES = ("h2d", "d2h") + ops.OPS + strategies.NAMES + ("single_gpu_throughput",)


def history_figures() -> tuple[str, ...]:
    return tuple(declared.floors()) + OTHER_HISTORY_FIGURES


@dataclass(frozen=True)
class CalibrationRule:
    """floor = min(lowest x (1 - min_margin), median x (1 - mad_k x spread)), spread = scaled MAD /
    median; refused when that floor lies more than max_below_median under the median. A ceiling
    (latency) mirrors it and is refused more than max_above_median above."""

    min_runs: int
    tight_runs: int  # runs after which more runs move the spread little (said when fewer were given)
    mad_k: float
    min_margin: float
    max_below_median: float
    max_above_median: float
    source: str
    yaml_path: str


@dataclass(frozen=True)
class HistoryRule:
    """A figure fails below median(last `runs`) x (1 - max(min_margin, mad_k x spread)); fewer than
    `min_runs` earlier runs: said, not judged; a noise wider than max_margin: said, not judged."""

    runs: int  # K: the last runs compared with
    min_runs: int
    mad_k: float
    min_margin: float
    max_margin: float
    figures: tuple[str, ...]
    source: str
    yaml_path: str


def _fraction(at: _At, example: str) -> float:
    value = at.quantity("percent")
    if not 0 <= value < 1:
        raise at.error("must be at least 0 % and below 100 %", f"write e.g. {example}")
    return value


def parse_calibration(at: _At) -> CalibrationRule:
    f = at.fields("calibration rule", required={
        "min_runs": "3", "tight_runs": "10", "mad_k": '"3 x"', "min_margin": '"3 %"', "max_below_median": '"10 %"',
        "max_above_median": '"50 %"', "source": SOURCE_HINT})
    min_runs = f["min_runs"].count(minimum=3)  # a median and a spread need three values at least
    return CalibrationRule(min_runs, f["tight_runs"].count(minimum=min_runs), f["mad_k"].quantity("ratio"),
                           _fraction(f["min_margin"], '"3 %"'), _fraction(f["max_below_median"], '"10 %"'),
                           f["max_above_median"].quantity("percent", positive=True), f["source"].source(), at.cite)


def parse_history(at: _At) -> HistoryRule:
    f = at.fields("history rule", required={
        "runs": "10", "min_runs": "3", "mad_k": '"3 x"', "min_margin": '"3 %"', "max_margin": '"10 %"',
        "figures": "[hbm_copy, hbm_read, sustained_bf16, gemm_fp8, h2d, d2h, all_reduce, ddp, single_gpu_throughput]",
        "source": SOURCE_HINT})
    min_runs = f["min_runs"].count(minimum=3)
    runs = f["runs"].count(minimum=min_runs)
    names = f["figures"].value
    if not isinstance(names, list) or not names:
        raise f["figures"].error("expected a list of figure names", f"write e.g. [hbm_copy, sustained_bf16]; known: "
                                                                     f"{', '.join(history_figures())}")
    for i, name in enumerate(names):
        _At(f["figures"].file, f["figures"].path[:-1] + (f"figures[{i}]",), name, f["figures"].line).choice(
            history_figures())
    low, high = _fraction(f["min_margin"], '"3 %"'), _fraction(f["max_margin"], '"10 %"')
    if low > high:
        raise f["min_margin"].error("is above max_margin", "no figure could be judged; lower min_margin")
    return HistoryRule(runs, min_runs, f["mad_k"].quantity("ratio"), low, high, tuple(names), f["source"].source(),
                       at.cite)
