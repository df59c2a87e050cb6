"""The nightly trend: a run's key figures, gathered over many runs, with a noise band.

Key figures are the ones a regression would move: busbw at the largest measured size per
(placement, op), tokens/s per (placement, strategy), copy bandwidth per GPU and pair
direction, and the verdict counts. Series are keyed by stable placement ids, so nights of
one node line up. The band is median +- 3 scaled MAD over the series (figures.mad_band).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass

from wirecheck.report.figures import mad_band
from wirecheck.report.model import RunView
from wirecheck.core.quantity import format_bytes

# family -> (title, unit, log y)
FAMILIES = {
    "busbw": ("bus bandwidth at the largest size", "GB/s", True),
    "tokens": ("training throughput", "tokens/s", False),
    "copy": ("copy bandwidth", "GB/s", False),
    "verdicts": ("verdicts", "count", False),
}


@dataclass(frozen=True)
class Point:
    family: str
    panel: str
    series: str
    value: float


def key_figures(view: RunView) -> list[Point]:
    out = []
    for (placement, op), sweep in view.sweeps.items():
        if sweep.largest is not None:
            out.append(Point("busbw", f"{op} at {format_bytes(sweep.largest.bytes)}", placement, sweep.largest.busbw / 1e9))
    for (placement, strategy), p in view.strategies.items():
        if p.tokens_per_s:
            out.append(Point("tokens", strategy, placement, p.tokens_per_s))
    copies = view.copies or {}
    for h in copies.get("host") or []:
        for key in ("h2d", "d2h"):
            if h.get(f"{key}_bytes_per_s"):
                out.append(Point("copy", key, f"GPU{h['gpu']}", h[f"{key}_bytes_per_s"] / 1e9))
    for p in copies.get("peer") or []:
        out.append(Point("copy", "peer", f"GPU{p['src']}->GPU{p['dst']}", p["bytes_per_s"] / 1e9))
    for outcome, n in view.verdict_counts.items():
        out.append(Point("verdicts", outcome, outcome, float(n)))
    return out


def gather(views: list[RunView]) -> dict[str, dict[str, dict[str, list[tuple]]]]:
    """family -> panel -> series -> [(run start, value)], runs without a start time left out."""
    table: dict = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    for view in views:
        when = view.started
        if when is None:
            continue
        for p in key_figures(view):
            table[p.family][p.panel][p.series].append((when, p.value))
    return table


@dataclass(frozen=True)
class Drift:
    family: str
    panel: str
    series: str
    latest: float
    median: float
    low: float
    high: float
    n: int

    @property
    def outside(self) -> bool:
        return not self.low <= self.latest <= self.high


def drifts(table, latest_started) -> list[Drift]:
    """The latest run's value of each series with 3+ points against its band."""
    out = []
    for family, panels in table.items():
        for panel, series in panels.items():
            for name, points in series.items():
                values = [v for _, v in sorted(points)]
                band = mad_band(values)
                latest = [v for t, v in points if t == latest_started]
                if band and latest:
                    out.append(Drift(family, panel, name, latest[-1], *band, len(values)))
    return out


def left_out_line(skipped) -> str:
    """The runs left out of the trend in one line: how many, and how many for each reason."""
    reasons = Counter(_reason(why) for _, why in skipped)
    return (f"{len(skipped)} file(s) left out of the trend: "
            + ", ".join(f"{n} {reason}" for reason, n in sorted(reasons.items(), key=lambda rn: (-rn[1], rn[0]))))


def _reason(why: str) -> str:
    """A reason without its particulars: what comes before its first parenthesis or semicolon; a file that
    could not be read names itself first (its reader's message)."""
    if why.startswith(("/", ".")) or ".jsonl" in why.split(" ", 1)[0]:
        return "not a readable record"
    return why.split(" (", 1)[0].split(";", 1)[0]
